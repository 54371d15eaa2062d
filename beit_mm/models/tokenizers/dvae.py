"""A trainable DALL-E dVAE (Ramesh et al. 2021, section 2.1): encoder -> Gumbel-softmax codes -> decoder.

The encoder is :class:`beit_mm.DALLEEncoder`'s architecture, so its trained weights load into the frozen tokenizer;
the decoder mirrors ``dall_e/decoder.py``; the prior is uniform with KL weight beta; the reconstruction likelihood is
logit-Laplace on :func:`map_pixels` pixels. Inputs are RGB in [0, 1] ``(B, 3, H, W)``.
"""
import math
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModel, BaseModule

from .dalle import (DALLE_GROUP_COUNT, DALLE_INPUT_CHANNELS, DALLE_N_BLK_PER_GROUP,
                                                   DALLE_N_HID, DALLE_VOCAB_SIZE, DECODER_KERNELS, LOGIT_LAPLACE_EPS,
                                                   DALLEEncoder, DALLEResBlock, map_pixels, same_conv)
from beit_mm.registry import MODELS

# dall_e/decoder.py `Decoder.n_init` default: channels after the decoder's input 1x1 conv.
DALLE_DECODER_N_INIT = 128
DALLE_KL_WEIGHT = 6.6
REC_LOSSES = ('logit_laplace', 'l1', 'l2')


def unmap_pixels(x: torch.Tensor) -> torch.Tensor:
    """``dall_e.utils.unmap_pixels``: the inverse of :func:`map_pixels`, clamped to [0, 1]. Any shape."""
    return torch.clamp((x - LOGIT_LAPLACE_EPS) / (1 - 2 * LOGIT_LAPLACE_EPS), 0, 1)


def logit_laplace_nll(x: torch.Tensor, mu: torch.Tensor, log_scale: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of the logit-Laplace distribution (DALL-E paper eq. 2), per value.

    ``p(x | mu, b) = exp(-|logit(x) - mu| / b) / (2 b x (1 - x))``, ``b = exp(log_scale)``.

    Args:
        x: targets in (0, 1) ``(B, C, H, W)``; mu, log_scale: same shape.
    Returns:
        ``-log p`` per value, same shape.
    """
    return (torch.abs(torch.logit(x) - mu) * torch.exp(-log_scale) + log_scale + math.log(2.0)
            + torch.log(x) + torch.log1p(-x))


def codebook_perplexity(logits: torch.Tensor) -> torch.Tensor:
    """exp(entropy) of the batch- and position-averaged code distribution of ``(B, V, h, w)`` logits, in [1, V]."""
    probs = F.softmax(logits.float(), dim=1).mean(dim=(0, 2, 3))
    entropy = -(probs * torch.log(probs.clamp_min(1e-30))).sum()
    return torch.exp(entropy)


def codebook_usage(logits: torch.Tensor) -> torch.Tensor:
    """Fraction of the vocabulary chosen by the argmax at least once; ``logits`` ``(B, vocab_size, h, w)``."""
    return torch.unique(logits.argmax(dim=1)).numel() / torch.tensor(float(logits.shape[1]))


class DALLEDecoder(BaseModule):
    """``dall_e.decoder.Decoder`` (trainable) for any ``group_count``; official parameter names.

    Args:
        group_count: groups; group g is ``n_hid * 2**(group_count - g)`` wide, all but the last upsample 2x.
        n_init, n_hid, n_blk_per_group: width after the input conv, of the last group, blocks per group.
        output_channels, vocab_size: image channels and input channels.
        stats_per_channel: 2 (logit-Laplace location and log-scale) or 1 (location only, for l1/l2).
    """

    def __init__(self,
                 group_count: int = DALLE_GROUP_COUNT,
                 n_init: int = DALLE_DECODER_N_INIT,
                 n_hid: int = DALLE_N_HID,
                 n_blk_per_group: int = DALLE_N_BLK_PER_GROUP,
                 output_channels: int = DALLE_INPUT_CHANNELS,
                 stats_per_channel: int = 2,
                 vocab_size: int = DALLE_VOCAB_SIZE,
                 init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if group_count < 1 or n_blk_per_group < 1:
            raise ValueError(f'group_count={group_count} and n_blk_per_group={n_blk_per_group} must be >= 1')
        if stats_per_channel not in (1, 2):
            raise ValueError(f'stats_per_channel={stats_per_channel}: use 2 (logit-Laplace) or 1 (l1/l2)')
        self.vocab_size = vocab_size
        n_layers = group_count * n_blk_per_group
        layers: list[tuple[str, nn.Module]] = [('input', same_conv(vocab_size, n_init, 1))]
        width = n_init
        for g in range(group_count):
            n_out = n_hid * 2**(group_count - 1 - g)
            group: list[tuple[str, nn.Module]] = []
            for i in range(n_blk_per_group):
                group.append((f'block_{i + 1}', DALLEResBlock(width, n_out, n_layers, DECODER_KERNELS)))
                width = n_out
            if g < group_count - 1:
                group.append(('upsample', nn.Upsample(scale_factor=2, mode='nearest')))
            layers.append((f'group_{g + 1}', nn.Sequential(OrderedDict(group))))
        layers.append(('output', nn.Sequential(OrderedDict([
            ('relu', nn.ReLU()),
            ('conv', same_conv(width, stats_per_channel * output_channels, 1)),
        ]))))
        self.blocks = nn.Sequential(OrderedDict(layers))
        for m in self.modules():  # dall_e.utils.Conv2d init: weight ~ N(0, 1 / fan_in), bias = 0
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, std=1 / math.sqrt(m.in_channels * m.kernel_size[0] * m.kernel_size[1]))
                nn.init.zeros_(m.bias)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, vocab_size, h, w)`` codes -> ``(B, stats_per_channel * C, h * 2**(G-1), w * 2**(G-1))``."""
        if z.dim() != 4 or z.shape[1] != self.vocab_size:
            raise ValueError(f'expected codes (B, {self.vocab_size}, h, w), got shape {tuple(z.shape)}')
        return self.blocks(z)


class DVAEEncoder(nn.Module):
    """:class:`beit_mm.DALLEEncoder`'s ``blocks`` with gradients on, so its keys load into the frozen one.

    Maps ``(B, C, H, W)`` in map_pixels space to logits ``(B, vocab_size, H / 2**(G-1), W / 2**(G-1))``.
    """

    def __init__(self, group_count: int, n_hid: int, n_blk_per_group: int, input_channels: int,
                 vocab_size: int) -> None:
        super().__init__()
        frozen = DALLEEncoder(group_count=group_count, n_hid=n_hid, n_blk_per_group=n_blk_per_group,
                              input_channels=input_channels, vocab_size=vocab_size, channels_last=False)
        self.downsample = frozen.downsample
        self.blocks = frozen.blocks.requires_grad_(True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[2] % self.downsample or x.shape[3] % self.downsample:
            raise ValueError(f'image size {tuple(x.shape[2:])} must be divisible by {self.downsample}; '
                             'crop or resize the images to a multiple of it')
        return self.blocks(x)


@MODELS.register_module()
class DVAE(BaseModel):
    """Discrete VAE with DALL-E's encoder/decoder, Gumbel-softmax relaxation and a uniform prior.

    Losses per pixel value: ``loss_rec`` (logit-Laplace NLL, or l1/l2 of ``sigmoid(mu)``), ``loss_kl`` (beta x KL to
    the uniform prior) and, with ``usage_weight > 0``, ``loss_usage``: KL of the batch-averaged code distribution to
    uniform (wav2vec 2.0's diversity loss), which keeps the hard codes from collapsing onto a few entries.

    Args:
        group_count, n_hid, n_blk_per_group, input_channels, vocab_size: ``DALLEEncoder``'s, shared by the decoder.
        decoder_n_init: channels after the decoder's input conv.
        rec_loss: ``'logit_laplace'`` | ``'l1'`` | ``'l2'``.
        temperature, kl_weight: Gumbel-softmax temperature and beta; ``DVAEScheduleHook`` anneals both.
        usage_weight: weight of ``loss_usage`` (0 = DALL-E's objective).
        data_preprocessor: must give RGB in [0, 1] (the default does).
    """

    def __init__(self,
                 group_count: int = DALLE_GROUP_COUNT,
                 n_hid: int = DALLE_N_HID,
                 n_blk_per_group: int = DALLE_N_BLK_PER_GROUP,
                 input_channels: int = DALLE_INPUT_CHANNELS,
                 vocab_size: int = DALLE_VOCAB_SIZE,
                 decoder_n_init: int = DALLE_DECODER_N_INIT,
                 rec_loss: str = 'logit_laplace',
                 temperature: float = 1.0,
                 kl_weight: float = DALLE_KL_WEIGHT,
                 usage_weight: float = 0.0,
                 data_preprocessor: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = dict(type='mmengine.ImgDataPreprocessor', mean=[0.0] * input_channels,
                                     std=[255.0] * input_channels, bgr_to_rgb=input_channels == 3)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if rec_loss not in REC_LOSSES:
            raise ValueError(f'rec_loss={rec_loss!r} is not supported; use one of {REC_LOSSES}')
        self.rec_loss = rec_loss
        self.temperature = temperature
        self.kl_weight = kl_weight
        self.usage_weight = usage_weight
        self.vocab_size = vocab_size
        self.input_channels = input_channels
        self.encoder = DVAEEncoder(group_count, n_hid, n_blk_per_group, input_channels, vocab_size)
        self.decoder = DALLEDecoder(group_count=group_count, n_init=decoder_n_init, n_hid=n_hid,
                                    n_blk_per_group=n_blk_per_group, output_channels=input_channels,
                                    stats_per_channel=2 if rec_loss == 'logit_laplace' else 1, vocab_size=vocab_size)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Encoder logits of [0, 1] images ``(B, C, H, W)`` -> ``(B, vocab_size, H/8, W/8)`` (4 groups)."""
        return self.encoder(map_pixels(x))

    def dense_features(self, x: torch.Tensor, layers: list[int] | tuple[int, ...] | None = None
                       ) -> list[torch.Tensor]:
        """Outputs of the encoder groups ``layers`` (None: the last), in group order.

        Args:
            x: [0, 1] images ``(B, C, H, W)``.
            layers: 0-based group indices, negative from the end.
        Returns:
            one ``(B, n_hid * 2**g, H', W')`` map per group.
        """
        groups = [m for name, m in self.encoder.blocks.named_children() if name.startswith('group_')]
        layers = (len(groups) - 1, ) if layers is None else tuple(layers)
        if not layers or any(not -len(groups) <= i < len(groups) for i in layers):
            raise ValueError(f'layers {layers} must be encoder group indices in [-{len(groups)}, {len(groups) - 1}]')
        wanted = {i % len(groups) for i in layers}
        x = self.encoder.blocks.input(map_pixels(x))
        outs = []
        for g, group in enumerate(groups[:max(wanted) + 1]):
            x = group(x)
            if g in wanted:
                outs.append(x)
        return outs

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Codes ``(B, vocab_size, h, w)`` -> images in [0, 1] ``(B, C, 8h, 8w)`` (4 groups)."""
        mu = torch.sigmoid(self.decoder(z)[:, :self.input_channels])
        return unmap_pixels(mu) if self.rec_loss == 'logit_laplace' else mu

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """Hard (argmax) tokens -> decoded images: ``(B, C, H, W)`` in [0, 1] -> same shape in [0, 1]."""
        ids = self.encode(x).argmax(dim=1)
        return self.decode(F.one_hot(ids, self.vocab_size).permute(0, 3, 1, 2).float())

    def loss(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Training losses and codebook statistics of a batch of [0, 1] images ``(B, C, H, W)``."""
        logits = self.encode(x)
        z = F.gumbel_softmax(logits, tau=self.temperature, hard=False, dim=1)
        stats = self.decoder(z)
        mu = stats[:, :self.input_channels]
        if self.rec_loss == 'logit_laplace':
            rec = logit_laplace_nll(map_pixels(x), mu, stats[:, self.input_channels:]).mean()
        elif self.rec_loss == 'l1':
            rec = F.l1_loss(torch.sigmoid(mu), x)
        else:
            rec = F.mse_loss(torch.sigmoid(mu), x)
        log_q = F.log_softmax(logits, dim=1)
        kl_per_position = (log_q.exp() * log_q).sum(dim=1) + math.log(self.vocab_size)  # (B, h, w)
        kl_per_value = kl_per_position.flatten(1).sum(1).mean() / x[0].numel()
        with torch.no_grad():
            perplexity = codebook_perplexity(logits)
            usage = codebook_usage(logits)
        losses = dict(loss_rec=rec, loss_kl=self.kl_weight * kl_per_value)
        if self.usage_weight > 0:
            q_bar = log_q.exp().mean(dim=(0, 2, 3))  # (V,)
            losses['loss_usage'] = self.usage_weight * (math.log(self.vocab_size) + (q_bar * torch.log(
                q_bar.clamp_min(1e-30))).sum())
        return dict(**losses, kl=kl_per_position.mean().detach(),
                    perplexity=perplexity, codebook_usage=usage)

    def forward(self, inputs: torch.Tensor, data_samples: list | None = None, mode: str = 'tensor'):
        """``mode='loss'``: :meth:`loss`; ``mode='tensor'``: :meth:`reconstruct`; ``inputs`` in [0, 1]."""
        if mode == 'loss':
            return self.loss(inputs)
        if mode == 'tensor':
            return self.reconstruct(inputs)
        raise ValueError(f'DVAE.forward supports mode "loss" and "tensor", got {mode!r} (it has no predict/val step; '
                         'judge a tokenizer by loss_rec, perplexity and codebook_usage in the training log)')
