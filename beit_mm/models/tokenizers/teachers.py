"""Frozen teachers whose patch features a ``beit_mm.VQKD`` learns to reconstruct.

A teacher maps ``(B, 3, H, W)`` float RGB 0..255 to ``(B, h * w, D)`` patch features, row-major; it normalizes the
images itself (unilm ``ScalingLayerForClip`` / ``ScalingLayerForIM``) and never trains.
"""
from __future__ import annotations

import os.path as osp
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import torch
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ...fileio.checkpoint import rename_keys
from ..layers import resize_pos_embed

# unilm beit2/modeling_vqkd.py ScalingLayerForClip (OpenAI CLIP's preprocessing), as fractions of 255
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
# unilm beit2/modeling_vqkd.py ScalingLayerForIM (the DINO teacher; ImageNet), as fractions of 255
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class FrozenTeacher(BaseModule):
    """Common part of the teachers: 0..255 RGB -> normalized input, frozen parameters, eval mode."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if len(mean) != 3 or len(std) != 3:
            raise ValueError(f'mean {mean} and std {std} must have 3 values (RGB, as fractions of 255)')
        self.register_buffer('mean', torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer('std', torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def freeze(self) -> None:
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> 'FrozenTeacher':
        return super().train(False)

    def normalize(self, images: Tensor) -> Tensor:
        """(B, 3, H, W) RGB 0..255 -> ``(clamp(x, 0, 255) / 255 - mean) / std``, float32."""
        if images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f'a teacher takes RGB images (B, 3, H, W) in 0..255, got shape {tuple(images.shape)}')
        return (images.float().clamp(0, 255) / 255 - self.mean) / self.std


class QuickGELU(nn.Module):
    """OpenAI CLIP's activation ``x * sigmoid(1.702 x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(1.702 * x)


class CLIPResidualBlock(nn.Module):
    """OpenAI CLIP ``ResidualAttentionBlock``: ``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``; (B, N, W)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([('c_fc', nn.Linear(width, width * 4)), ('gelu', QuickGELU()),
                                              ('c_proj', nn.Linear(width * 4, width))]))

    def forward(self, x: Tensor) -> Tensor:
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class CLIPTransformer(nn.Module):

    def __init__(self, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.resblocks = nn.Sequential(*[CLIPResidualBlock(width, heads) for _ in range(layers)])

    def forward(self, x: Tensor) -> Tensor:
        return self.resblocks(x)


class CLIPVisionTransformer(nn.Module):
    """OpenAI CLIP's ``VisionTransformer`` returning ``ln_post(tokens)[:, 1:] @ proj``.

    (B, 3, H, W) normalized images -> (B, H/p * W/p, output_dim); the position embedding is resampled bicubically for
    other sizes.
    """

    def __init__(self, image_size: int, patch_size: int, width: int, layers: int, heads: int,
                 output_dim: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.grid = (image_size // patch_size, ) * 2
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        scale = width**-0.5  # clip/model.py VisionTransformer.__init__
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(self.grid[0] * self.grid[1] + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = CLIPTransformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv1(x)
        grid = (x.shape[2], x.shape[3])
        x = x.flatten(2).transpose(1, 2)
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1)
        x = x + resize_pos_embed(self.positional_embedding[None], self.grid, grid)
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 1:]) @ self.proj


def convert_hf_clip(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Hugging Face ``CLIPVisionModelWithProjection``/``CLIPModel`` weights -> OpenAI's ``visual.*`` names.

    q, k, v projections are concatenated into ``in_proj_{weight,bias}``, ``visual_projection.weight`` (D, W) becomes
    ``visual.proj`` (W, D); text-tower keys are dropped.
    """
    sd = {k: v for k, v in state_dict.items() if k.startswith(('vision_model.', 'visual_projection.'))}
    if 'visual_projection.weight' not in sd:
        raise KeyError('no visual_projection.weight in this Hugging Face checkpoint: a CLIP teacher needs the '
                       'projection; save a CLIPVisionModelWithProjection or CLIPModel, not a CLIPVisionModel')
    rules = [
        (r'^vision_model\.embeddings\.class_embedding$', 'visual.class_embedding'),
        (r'^vision_model\.embeddings\.patch_embedding\.', 'visual.conv1.'),
        (r'^vision_model\.embeddings\.position_embedding\.weight$', 'visual.positional_embedding'),
        (r'^vision_model\.pre_layrnorm\.', 'visual.ln_pre.'),
        (r'^vision_model\.post_layernorm\.', 'visual.ln_post.'),
        (r'^vision_model\.encoder\.layers\.(\d+)\.', r'visual.transformer.resblocks.\1.'),
        (r'\.self_attn\.out_proj\.', '.attn.out_proj.'),
        (r'\.layer_norm1\.', '.ln_1.'),
        (r'\.layer_norm2\.', '.ln_2.'),
        (r'\.mlp\.fc1\.', '.mlp.c_fc.'),
        (r'\.mlp\.fc2\.', '.mlp.c_proj.'),
    ]
    proj = sd.pop('visual_projection.weight')
    sd.pop('vision_model.embeddings.position_ids', None)
    out = rename_keys(sd, rules)
    for key in [k for k in out if k.endswith('.self_attn.q_proj.weight')]:
        base = key[:-len('.self_attn.q_proj.weight')]
        for kind in ('weight', 'bias'):
            parts = [out.pop(f'{base}.self_attn.{n}_proj.{kind}') for n in ('q', 'k', 'v')]
            out[f'{base}.attn.in_proj_{kind}'] = torch.cat(parts, dim=0)
    out['visual.proj'] = proj.t().contiguous()
    return out


def load_clip_state_dict(path: str, trust_code: bool = False) -> dict[str, Tensor]:
    """CLIP weights under OpenAI names from OpenAI's file or a Hugging Face folder.

    Args:
        path: a state dict, a TorchScript archive (only with ``trust_code``: loading it runs code the file carries) or a
            Hugging Face folder (renamed by :func:`convert_hf_clip`).
    """
    from beit_mm.fileio.checkpoint import (is_torchscript, load_safetensors, load_state_dict_file,
                                           open_torchscript_trusted, refuse_code)
    from beit_mm.fileio.json_file import read_json
    if osp.isdir(path):
        cfg_path = osp.join(path, 'config.json')
        if not osp.isfile(cfg_path):
            raise FileNotFoundError(f'{path} is a folder without config.json; give a Hugging Face CLIP folder '
                                    '(save_pretrained output) or OpenAI\'s ViT-B-16.pt file')
        cfg = read_json(cfg_path)
        act = cfg.get('vision_config', cfg).get('hidden_act', 'quick_gelu')
        if act != 'quick_gelu':
            raise ValueError(f'{cfg_path}: hidden_act={act!r}; CLIPTeacher implements OpenAI CLIP (quick_gelu)')
        if osp.isfile(osp.join(path, 'model.safetensors')):
            sd = load_safetensors(osp.join(path, 'model.safetensors'))
        elif osp.isfile(osp.join(path, 'pytorch_model.bin')):
            sd = load_state_dict_file(osp.join(path, 'pytorch_model.bin'))
        else:
            raise FileNotFoundError(f'{path} has neither model.safetensors nor pytorch_model.bin')
        return convert_hf_clip(sd)
    if is_torchscript(path):
        if not trust_code:
            raise refuse_code(path, 'a TorchScript archive (OpenAI\'s CLIP release format)',
                              f'python tools/convert_checkpoint.py --model clip --source openai --trust-code {path} '
                              'clip_visual.pth')
        return open_torchscript_trusted(path)
    return load_state_dict_file(path)


@MODELS.register_module()
class CLIPTeacher(FrozenTeacher):
    """unilm's CLIP teacher: (B, 3, H, W) RGB 0..255 -> (B, H/p * W/p, output_dim).

    Args:
        image_size, patch_size, width, layers, heads, output_dim: the vision tower (defaults: ViT-B/16).
        checkpoint: OpenAI's file or a Hugging Face folder, loaded strictly at ``init_weights``; None keeps the random
            init.
        trust_code: allow OpenAI's TorchScript release, which runs code the file carries.
    """

    def __init__(self,
                 image_size: int = 224,
                 patch_size: int = 16,
                 width: int = 768,
                 layers: int = 12,
                 heads: int = 12,
                 output_dim: int = 512,
                 checkpoint: str | None = None,
                 trust_code: bool = False) -> None:
        super().__init__(CLIP_MEAN, CLIP_STD)
        self.checkpoint = checkpoint
        self.trust_code = trust_code
        self.out_dims = output_dim
        self.patch_size = patch_size
        self.visual = CLIPVisionTransformer(image_size, patch_size, width, layers, heads, output_dim)
        self.freeze()

    def init_weights(self) -> None:
        if self.checkpoint is None:
            return
        sd = {k: v for k, v in load_clip_state_dict(self.checkpoint, self.trust_code).items() if k.startswith('visual.')}
        own = self.state_dict()
        missing = sorted(set(own) - set(sd))
        unexpected = sorted(set(sd) - set(own))
        if missing or unexpected:
            raise KeyError(f'{self.checkpoint}: {len(missing)} CLIP vision weights missing (first: {missing[:4]}), '
                           f'{len(unexpected)} unexpected (first: {unexpected[:4]}); is it a CLIP ViT file?')
        bad = [f'{k} {tuple(sd[k].shape)} vs {tuple(own[k].shape)}' for k in own if sd[k].shape != own[k].shape]
        if bad:
            width, layers = self.visual.ln_pre.normalized_shape[0], len(self.visual.transformer.resblocks)
            raise ValueError(f'{self.checkpoint} is another CLIP architecture than CLIPTeacher(width={width}, '
                             f'layers={layers}, output_dim={self.out_dims}, ...): {bad[:3]}; set the teacher\'s '
                             'arguments to the file\'s')
        self.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
        MMLogger.get_current_instance().info(f'CLIPTeacher: loaded {len(sd)} weights from {self.checkpoint}')
        self._is_init = True

    @torch.no_grad()
    def forward(self, images: Tensor) -> Tensor:
        with torch.autocast(images.device.type, enabled=False):
            return self.visual(self.normalize(images))


@MODELS.register_module()
class BackboneTeacher(FrozenTeacher):
    """A beit_mm backbone as teacher: its last feature map (B, D, h, w) -> (B, h * w, D).

    Args:
        backbone: a beit_mm backbone config with its checkpoint in ``init_cfg``.
        mean, std: RGB normalization as fractions of 255.
    """

    def __init__(self, backbone: dict, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD) -> None:
        super().__init__(mean, std)
        self.backbone = MODELS.build(backbone)
        self.freeze()

    @torch.no_grad()
    def forward(self, images: Tensor) -> Tensor:
        with torch.autocast(images.device.type, enabled=False):
            feats = self.backbone(self.normalize(images))[-1]
        return feats.flatten(2).transpose(1, 2)
