"""BEiT v2's VQ-KD tokenizer (Peng et al. 2022, arXiv 2208.06366; unilm ``beit2/modeling_vqkd.py``).

Data flow (default arch, 224 x 224)::

    images (B, 3, 224, 224) RGB 0..255 -> x / 127.5 - 1
      -> encoder: BEiT ViT-B/16, abs. position embeddings, final norm      (B, 196, 768)
      -> encode_task_layer: Linear-Tanh-Linear                             (B, 196, 32)
      -> quantize: l2-normalize, nearest of 8192 unit codes (EMA codebook)  ids (B, 196), codes (B, 196, 32)
      -> decoder: ViT with patch 1 on the 14 x 14 code grid                (B, 196, 768)
      -> decode_task_layer: Linear-Tanh-Linear to the teacher's width       (B, 196, 512)
    loss = (1 - cos(decoded, teacher(images))).mean() + beta * mse(sg(codes), normalized features)

Without a teacher it is a frozen tokenizer; with one it trains (``forward(mode='loss')``). ``autocast_dtype`` covers
the two transformers only: the quantizer stays fp32, as bf16 distances would be 8x coarser than unilm's fp16.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from mmengine.logging import MMLogger
from mmengine.model import BaseModel
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ..backbones.beit import BEiT
from ..layers.weight_init import trunc_normal_timm_
from .quantizer import NormEMAQuantizer, count_ids

# unilm beit2/modeling_vqkd.py get_model_default_params + vqkd_encoder_base_decoder_{1x,3x}768x12_{clip,dino}
_BASE = dict(embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4.0)
ARCHS: dict[str, dict] = {
    'base_decoder_3x_clip': dict(encoder=_BASE, decoder=dict(_BASE, num_layers=3), img_size=224, patch_size=16,
                                 num_codes=8192, code_dims=32, out_dims=512),
    'base_decoder_1x_clip': dict(encoder=_BASE, decoder=dict(_BASE, num_layers=1), img_size=224, patch_size=16,
                                 num_codes=8192, code_dims=32, out_dims=512),
    'base_decoder_1x_dino': dict(encoder=_BASE, decoder=dict(_BASE, num_layers=1), img_size=224, patch_size=16,
                                 num_codes=8192, code_dims=32, out_dims=768),
}
ARCH_KEYS = ('encoder', 'decoder', 'img_size', 'patch_size', 'num_codes', 'code_dims', 'out_dims')
_AUTOCAST_DTYPES = {'bfloat16': torch.bfloat16, 'float16': torch.float16}
_DECODER_PREFIXES = ('decoder.', 'decode_task_layer.')


def task_layer(in_dims: int, out_dims: int) -> nn.Sequential:
    """unilm's ``encode_task_layer``/``decode_task_layer``: Linear(in, in) - Tanh - Linear(in, out)."""
    return nn.Sequential(nn.Linear(in_dims, in_dims), nn.Tanh(), nn.Linear(in_dims, out_dims))


def vit(arch: dict, img_size: int, patch_size: int, in_channels: int, attn_impl: str) -> BEiT:
    """unilm's ``VisionTransformer`` as VQ-KD builds it: absolute position embeddings, no relative bias, no layer
    scale, no drop path, LayerNorm eps 1e-6, patch tokens after a final norm."""
    return BEiT(arch=arch, img_size=img_size, patch_size=patch_size, in_channels=in_channels, use_abs_pos_emb=True,
                use_rel_pos_bias=False, layer_scale_init_value=0.0, drop_path_rate=0.0, final_norm=True,
                attn_impl=attn_impl, init_mode='finetune')


def cosine_loss(rec: Tensor, target: Tensor) -> Tensor:
    """unilm ``VQKD.calculate_rec_loss`` ('cosine'): mean over all positions of ``1 - cos(rec, target)``."""
    rec = rec / rec.norm(dim=-1, keepdim=True)
    target = target / target.norm(dim=-1, keepdim=True)
    return (1 - (rec * target).sum(-1)).mean()


@MODELS.register_module()
class VQKD(BaseModel):
    """Vector-quantized knowledge-distillation tokenizer.

    Args:
        arch: ``'base_decoder_3x_clip'``, ``'base_decoder_1x_clip'``, ``'base_decoder_1x_dino'``, or a dict with
            ``encoder``/``decoder`` (BEiT arch dicts), ``img_size``, ``patch_size``, ``num_codes``, ``code_dims`` and
            ``out_dims`` (the teacher's width).
        teacher: a teacher config (``CLIPTeacher``, ``BackboneTeacher``); None = a frozen tokenizer.
        with_decoder: build the decoder and decode task layer.
        decay, beta, kmeans_init: the codebook's EMA decay, commitment weight, k-means init on the first batch.
        dead_code_ratio: > 0 re-seeds rarely used codes (``NormEMAQuantizer``).
        autocast_dtype: None (fp32), ``'bfloat16'`` or ``'float16'`` for the transformers.
        attn_impl: attention kernel of the transformers (``beit_mm.BEiT``).
        data_preprocessor: must give float RGB 0..255 (the default does).
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH)`` of a beit_mm VQ-KD file, loaded strictly.
    """

    def __init__(self,
                 arch: str | dict = 'base_decoder_3x_clip',
                 teacher: dict | None = None,
                 with_decoder: bool = True,
                 decay: float = 0.99,
                 beta: float = 1.0,
                 kmeans_init: bool = True,
                 dead_code_ratio: float = 0.0,
                 autocast_dtype: str | None = None,
                 attn_impl: str = 'auto',
                 data_preprocessor: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = dict(type='mmengine.ImgDataPreprocessor', bgr_to_rgb=True)
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if isinstance(arch, str):
            if arch not in ARCHS:
                raise ValueError(f'unknown VQKD arch {arch!r}; choose one of {sorted(ARCHS)} or pass a dict with '
                                 f'{ARCH_KEYS}')
            arch = ARCHS[arch]
        missing = set(ARCH_KEYS) - set(arch)
        if missing:
            raise ValueError(f'VQKD arch dict lacks {sorted(missing)} (needs {ARCH_KEYS})')
        if teacher is not None and not with_decoder:
            raise ValueError('a VQKD with a teacher trains its decoder; set with_decoder=True')
        if autocast_dtype is not None and autocast_dtype not in _AUTOCAST_DTYPES:
            raise ValueError(f'autocast_dtype={autocast_dtype!r}; use None, "bfloat16" or "float16"')
        arch = copy.deepcopy(arch)
        self.arch = arch
        self.patch_size = arch['patch_size']
        self.num_codes = self.vocab_size = arch['num_codes']
        self.code_dims = arch['code_dims']
        self.out_dims = arch['out_dims']
        self.autocast_dtype = autocast_dtype
        grid = arch['img_size'] // self.patch_size
        self.encoder = vit(arch['encoder'], arch['img_size'], self.patch_size, 3, attn_impl)
        self.encode_task_layer = task_layer(self.encoder.embed_dims, self.code_dims)
        self.quantize = NormEMAQuantizer(self.num_codes, self.code_dims, decay=decay, beta=beta,
                                         kmeans_init=kmeans_init, dead_code_ratio=dead_code_ratio)
        self.with_decoder = with_decoder
        if with_decoder:
            self.decoder = vit(arch['decoder'], grid, 1, self.code_dims, attn_impl)
            self.decode_task_layer = task_layer(self.decoder.embed_dims, self.out_dims)
        self.teacher = MODELS.build(teacher) if teacher is not None else None
        if self.teacher is None:
            self.requires_grad_(False)
            self.eval()

    def init_weights(self) -> None:
        """unilm's random init, or the strict load of ``init_cfg``; a teacher initializes from its own config."""
        if self.teacher is not None:
            self.teacher.init_weights()
        if self.init_cfg is not None:
            if not (isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained'):
                raise ValueError(f'VQKD supports init_cfg=dict(type="Pretrained", checkpoint=PATH) only, got '
                                 f'{self.init_cfg}')
            self.load_tokenizer(self.init_cfg['checkpoint'])
            self._is_init = True
            return
        for module in (self.encoder, getattr(self, 'decoder', None)):
            if module is not None:
                module.init_weights()
        layers = [self.encode_task_layer] + ([self.decode_task_layer] if self.with_decoder else [])
        with torch.no_grad():
            for seq in layers:
                for m in seq.modules():
                    if isinstance(m, nn.Linear):
                        trunc_normal_timm_(m.weight)
                        nn.init.zeros_(m.bias)
        self._is_init = True

    def load_tokenizer(self, path: str) -> None:
        """Load a beit_mm VQ-KD file strictly (all keys but the teacher's); without a decoder its weights
        are ignored."""
        from beit_mm.fileio import load_state_dict_file
        sd = {k: v for k, v in load_state_dict_file(path).items() if not k.startswith('teacher.')}
        if any(k.startswith(('teacher_model.', 'scaling_layer.')) or '.fc_norm.' in k for k in sd):
            raise KeyError(f'{path} is an unconverted unilm VQ-KD file; convert it first: python '
                           'tools/convert_checkpoint.py --model vqkd --source unilm SRC DST')
        num_decoder = 0
        if not self.with_decoder:
            num_decoder = sum(k.startswith(_DECODER_PREFIXES) for k in sd)
            sd = {k: v for k, v in sd.items() if not k.startswith(_DECODER_PREFIXES)}
        own = {k for k in self.state_dict() if not k.startswith('teacher.')}
        missing, unexpected = sorted(own - set(sd)), sorted(set(sd) - own)
        if missing or unexpected:
            hint = ''
            if missing and all(k.startswith(_DECODER_PREFIXES) for k in missing):
                hint = (' The file has no decoder (a tokenize-only file, e.g. from mmpretrain): build '
                        'VQKD(with_decoder=False).')
            shapes = {k: tuple(sd[k].shape) for k in ('encoder.pos_embed', 'quantize.embedding.weight') if k in sd}
            raise KeyError(f'{path}: {len(missing)} VQKD weights missing (first: {missing[:4]}), {len(unexpected)} '
                           f'unexpected keys (first: {unexpected[:4]}); check arch (the file\'s shapes: {shapes}).'
                           f'{hint}')
        result = self.load_state_dict(sd, strict=False)
        assert not result.unexpected_keys and all(k.startswith('teacher.') for k in result.missing_keys)
        skipped = f' (skipped its {num_decoder} decoder weights: with_decoder=False)' if num_decoder else ''
        MMLogger.get_current_instance().info(f'VQKD: loaded {len(sd)} weights from {path}{skipped}')

    def train(self, mode: bool = True) -> 'VQKD':
        return super().train(mode and self.teacher is not None)

    def _autocast(self, device_type: str):
        return torch.autocast(device_type, dtype=_AUTOCAST_DTYPES.get(self.autocast_dtype, torch.bfloat16),
                              enabled=self.autocast_dtype is not None)

    def encode(self, images: Tensor, update: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """(B, 3, H, W) RGB 0..255 -> codes (B, N, D) (straight-through), commitment loss, ids (B, N).

        ``update`` (default: the quantizer's training mode) initializes and EMA-updates the codebook.
        """
        if images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f'VQKD takes RGB images (B, 3, H, W) in 0..255, got shape {tuple(images.shape)}')
        x = images.float() / 127.5 - 1.0  # unilm VQKD.pre_process, process_type='default'
        with self._autocast(x.device.type):
            feats = self.encoder.forward_tokens(x)[0][-1][:, 1:]
        with torch.autocast(x.device.type, enabled=False):
            # as unilm (modeling_vqkd.py lines 155-156); unilm's quantizer, below, runs under the step's autocast:
            z = self.encode_task_layer(feats.float())
            return self.quantize(z, update)

    def decode(self, codes: Tensor, grid: tuple[int, int]) -> Tensor:
        """Codes (B, h*w, D) -> reconstructed teacher features (B, h*w, out_dims)."""
        if not self.with_decoder:
            raise RuntimeError('this VQKD was built with with_decoder=False; it can tokenize but not decode')
        maps = codes.transpose(1, 2).reshape(codes.shape[0], self.code_dims, *grid)
        with self._autocast(codes.device.type):
            feats = self.decoder.forward_tokens(maps)[0][-1][:, 1:]
        with torch.autocast(codes.device.type, enabled=False):  # unilm: under autocast (module docstring)
            return self.decode_task_layer(feats.float())

    @torch.no_grad()
    def get_token_ids(self, images: Tensor) -> Tensor:
        """(B, 3, H, W) float RGB 0..255 -> int64 (B, H/p * W/p), row-major; never updates the codebook."""
        return self.encode(images, update=False)[2]

    def get_targets(self, inputs: dict[str, Tensor]) -> Tensor:
        """Token ids of ``inputs['target_images']`` (B, 3, H, W) float RGB 0..255 -> int64 (B, H/p * W/p)."""
        return self.get_token_ids(inputs['target_images'])

    def teacher_features(self, images: Tensor) -> Tensor:
        """The teacher's patch features of RGB 0..255 images: (B, N, out_dims), checked against the grid."""
        if self.teacher is None:
            raise RuntimeError('this VQKD has no teacher; build it with teacher=dict(type=...) to train it')
        target = self.teacher(images)
        n = (images.shape[2] // self.patch_size) * (images.shape[3] // self.patch_size)
        if target.shape[1:] != (n, self.out_dims):
            raise ValueError(f'the teacher gives features {tuple(target.shape[1:])} per image, the tokenizer needs '
                             f'({n}, {self.out_dims}) (its {images.shape[2] // self.patch_size}x'
                             f'{images.shape[3] // self.patch_size} grid, arch out_dims): match the teacher\'s '
                             'patch stride to arch patch_size and out_dims to its feature width')
        return target

    def loss(self, images: Tensor) -> dict[str, Tensor]:
        """``loss_quant`` (commitment), ``loss_rec`` (cosine to the teacher) and ``codebook_usage`` of a batch."""
        target = self.teacher_features(images)
        codes, loss_quant, ids = self.encode(images)
        grid = (images.shape[2] // self.patch_size, images.shape[3] // self.patch_size)
        rec = self.decode(codes, grid)
        usage = count_ids(ids, self.num_codes).gt(0).float().mean()
        return dict(loss_quant=loss_quant, loss_rec=cosine_loss(rec, target.float()), codebook_usage=usage)

    def forward(self, inputs: Tensor, data_samples: list | None = None, mode: str = 'tensor'):
        """``mode='loss'``: :meth:`loss`; ``mode='tensor'``: :meth:`get_token_ids`; inputs RGB 0..255."""
        if mode == 'loss':
            return self.loss(inputs)
        if mode == 'tensor':
            return self.get_token_ids(inputs)
        raise ValueError(f'VQKD.forward supports mode "loss" and "tensor", got {mode!r} (held-out statistics come '
                         'from beit_mm.TokenizerEvalHook)')
