"""DALL-E's dVAE encoder as BEiT's tokenizer: images -> visual token ids (OpenAI ``dall_e`` v0.1).

A 7x7 input conv, ``group_count`` groups of residual blocks (widths ``n_hid * 2**g``, a 2x2 max-pool after all but
the last), then ReLU + 1x1 conv to ``vocab_size`` logits ``(B, vocab_size, H/8, W/8)``. Parameter names are the
official ones with ``weight``/``bias`` for ``w``/``b``.
"""
import math
from collections import OrderedDict

import torch
import torch.nn as nn
from mmengine.model import BaseModule
from mmengine.runner.checkpoint import load_checkpoint

from beit_mm.registry import MODELS

# dall_e/utils.py `logit_laplace_eps`: the logit-Laplace likelihood of the dVAE keeps pixels inside [eps, 1 - eps].
LOGIT_LAPLACE_EPS = 0.1
MAX_PIXEL_VALUE = 255.0
# dall_e/encoder.py `Encoder` defaults (the released `encoder.pkl`).
DALLE_GROUP_COUNT = 4
DALLE_N_HID = 256
DALLE_N_BLK_PER_GROUP = 2
DALLE_INPUT_CHANNELS = 3
DALLE_VOCAB_SIZE = 8192

_AUTOCAST_DTYPES = {'bfloat16': torch.bfloat16, 'float16': torch.float16}


def map_pixels(x: torch.Tensor) -> torch.Tensor:
    """``dall_e.utils.map_pixels``: [0, 1] -> [eps, 1 - eps] by ``(1 - 2 * eps) * x + eps``; any shape."""
    if not x.is_floating_point():
        raise ValueError(f'map_pixels expects floating-point pixels in [0, 1], got dtype {x.dtype}; '
                         'convert uint8 images with x.float() / 255 first')
    return (1 - 2 * LOGIT_LAPLACE_EPS) * x + LOGIT_LAPLACE_EPS


def same_conv(n_in: int, n_out: int, kernel_size: int) -> nn.Conv2d:
    """``dall_e.utils.Conv2d``: stride 1, 'same' padding ``(k - 1) // 2``, with bias."""
    return nn.Conv2d(n_in, n_out, kernel_size, padding=(kernel_size - 1) // 2)


ENCODER_KERNELS = (3, 3, 3, 1)  # dall_e.encoder.EncoderBlock's res_path
DECODER_KERNELS = (1, 3, 3, 3)  # dall_e.decoder.DecoderBlock's res_path


class DALLEResBlock(nn.Module):
    """``dall_e``'s ``EncoderBlock``/``DecoderBlock``: ``id_path(x) + post_gain * res_path(x)``.

    ``res_path`` is (relu, conv) x 4 with widths n_in -> n_out/4 (x3) -> n_out and the given kernels; ``id_path`` a 1x1
    conv when ``n_in != n_out``; ``post_gain = 1 / n_layers**2``. ``(B, n_in, H, W) -> (B, n_out, H, W)``.
    """

    def __init__(self, n_in: int, n_out: int, n_layers: int, kernel_sizes: tuple[int, ...] = ENCODER_KERNELS) -> None:
        super().__init__()
        if n_out % 4:
            raise ValueError(f'n_out={n_out} must be divisible by 4 (the residual path is n_out / 4 wide)')
        n_hid = n_out // 4
        widths = (n_in, n_hid, n_hid, n_hid, n_out)
        self.post_gain = 1 / n_layers**2
        self.id_path = same_conv(n_in, n_out, 1) if n_in != n_out else nn.Identity()
        layers = []
        for i, k in enumerate(kernel_sizes):
            layers += [(f'relu_{i + 1}', nn.ReLU()), (f'conv_{i + 1}', same_conv(widths[i], widths[i + 1], k))]
        self.res_path = nn.Sequential(OrderedDict(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.id_path(x) + self.post_gain * self.res_path(x)


@MODELS.register_module()
class DALLEEncoder(BaseModule):
    """DALL-E dVAE encoder as a frozen tokenizer: no grad, always in eval mode.

    Args:
        group_count: number of groups; downsamples by ``2**(group_count - 1)``.
        n_hid: width of group 1; group g (1-based) is ``n_hid * 2**(g - 1)`` wide.
        n_blk_per_group, input_channels, vocab_size: residual blocks per group, image channels, visual tokens.
        channels_last: run the convolutions in ``torch.channels_last``.
        autocast_dtype: None (fp32), ``'bfloat16'`` or ``'float16'`` for all but the output conv, which stays fp32;
            low precision can flip the argmax of near-tied logits.
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH)``, loaded strictly.
    """

    def __init__(self,
                 group_count: int = DALLE_GROUP_COUNT,
                 n_hid: int = DALLE_N_HID,
                 n_blk_per_group: int = DALLE_N_BLK_PER_GROUP,
                 input_channels: int = DALLE_INPUT_CHANNELS,
                 vocab_size: int = DALLE_VOCAB_SIZE,
                 channels_last: bool = True,
                 autocast_dtype: str | None = None,
                 init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if group_count < 1 or n_blk_per_group < 1:
            raise ValueError(f'group_count={group_count} and n_blk_per_group={n_blk_per_group} must be >= 1')
        if autocast_dtype is not None and autocast_dtype not in _AUTOCAST_DTYPES:
            raise ValueError(f'autocast_dtype={autocast_dtype!r} is not supported; use None, '
                             + ' or '.join(repr(k) for k in _AUTOCAST_DTYPES))
        self.group_count = group_count
        self.input_channels = input_channels
        self.vocab_size = vocab_size
        self.channels_last = channels_last
        self.autocast_dtype = autocast_dtype
        self.downsample = 2**(group_count - 1)

        n_layers = group_count * n_blk_per_group
        layers: list[tuple[str, nn.Module]] = [('input', same_conv(input_channels, n_hid, 7))]
        width = n_hid
        for g in range(group_count):
            n_out = n_hid * 2**g
            group: list[tuple[str, nn.Module]] = []
            for i in range(n_blk_per_group):
                group.append((f'block_{i + 1}', DALLEResBlock(width, n_out, n_layers, ENCODER_KERNELS)))
                width = n_out
            if g < group_count - 1:
                group.append(('pool', nn.MaxPool2d(kernel_size=2)))
            layers.append((f'group_{g + 1}', nn.Sequential(OrderedDict(group))))
        layers.append(('output', nn.Sequential(OrderedDict([
            ('relu', nn.ReLU()),
            ('conv', same_conv(width, vocab_size, 1)),
        ]))))
        self.blocks = nn.Sequential(OrderedDict(layers))

        self._init_like_dall_e()
        self.requires_grad_(False)
        if channels_last:
            self.to(memory_format=torch.channels_last)
        self.eval()

    def _init_like_dall_e(self) -> None:
        """``dall_e.utils.Conv2d`` init: weight ~ N(0, 1 / fan_in), bias = 0."""
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.in_channels * m.kernel_size[0] * m.kernel_size[1]
                nn.init.normal_(m.weight, std=1 / math.sqrt(fan_in))
                nn.init.zeros_(m.bias)

    def init_weights(self) -> None:
        """Load ``init_cfg``'s checkpoint strictly; without it keep the dall_e init."""
        if self.init_cfg is None:
            return
        if not (isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained'):
            raise ValueError(f'DALLEEncoder only supports init_cfg=dict(type="Pretrained", checkpoint=PATH), got '
                             f'{self.init_cfg}; convert the official encoder.pkl with beit_mm.converters.dalle')
        load_checkpoint(
            self,
            self.init_cfg['checkpoint'],
            map_location=self.init_cfg.get('map_location', 'cpu'),
            strict=True,
            logger='current')
        self._is_init = True

    def train(self, mode: bool = True) -> 'DALLEEncoder':
        return super().train(False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Visual-token logits.

        Args:
            x: ``(B, C, H, W)`` :func:`map_pixels` of [0, 1] pixels; H, W divisible by ``2**(group_count - 1)``.
        Returns:
            float32 logits ``(B, vocab_size, H/8, W/8)``.
        """
        if x.dim() != 4 or x.shape[1] != self.input_channels:
            raise ValueError(f'expected images (B, {self.input_channels}, H, W), got shape {tuple(x.shape)}')
        if x.shape[2] % self.downsample or x.shape[3] % self.downsample:
            raise ValueError(f'image size {tuple(x.shape[2:])} must be divisible by {self.downsample} '
                             '(the encoder max-pools by 2 after all groups but the last)')
        x = x.float()
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        # Explicit autocast regions: the configured precision holds even inside a caller's AMP context.
        with torch.autocast(
                device_type=x.device.type,
                dtype=_AUTOCAST_DTYPES.get(self.autocast_dtype, torch.bfloat16),
                enabled=self.autocast_dtype is not None):
            for name, layer in self.blocks.named_children():
                if name == 'output':
                    break
                x = layer(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.blocks.output(x.float())

    def get_token_ids(self, x: torch.Tensor) -> torch.Tensor:
        """Argmax of :meth:`forward`, row-major: ``(B, C, H, W)`` -> int64 ``(B, H/8 * W/8)``."""
        return self.forward(x).argmax(dim=1).flatten(1)

    def get_targets(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Token ids of ``inputs['target_images']`` (B, C, h, w) float RGB 0..255 -> int64 (B, h/8 * w/8)."""
        return self.get_token_ids(map_pixels(inputs['target_images'] / MAX_PIXEL_VALUE))
