"""ViT-Adapter's parts (Chen et al. ICLR 2023; czczup/ViT-Adapter ``adapter_modules.py``), official names.

A convolutional spatial prior at strides 8/16/32; an injector (ViT tokens attend to the prior) before every group of
blocks and an extractor (the prior attends to the ViT tokens) after it. The deformable attention is
:class:`~.ms_deform_attn.PortableMSDeformAttn` (mmcv's ``MultiScaleDeformableAttention`` with a kernel for every
device). The prior ``c`` is (B, 4hw + hw + hw/4, C): the stride-8, 16 and 32 maps, row-major, concatenated (h, w: the
ViT's patch grid, both even).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils.checkpoint as cp
from mmcv.cnn import build_norm_layer
from mmcv.cnn.bricks import DropPath
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from .ms_deform_attn import PortableMSDeformAttn

#: The prior's levels relative to the ViT's patch grid (h, w) = (H/16, W/16): strides 8, 16, 32.
PRIOR_SCALES = (2.0, 1.0, 0.5)


def prior_shapes(grid: tuple[int, int]) -> list[tuple[int, int]]:
    """The (rows, cols) of the stride-8/16/32 prior maps for a ViT patch grid ``grid`` = (h, w) (both even)."""
    h, w = grid
    return [(h * 2, w * 2), (h, w), (h // 2, w // 2)]


def reference_points(shapes: list[tuple[int, int]], device: torch.device) -> Tensor:
    """Pixel centres of maps ``shapes`` in [0, 1] as (x, y): (1, sum(h*w), 1, 2)."""
    points = []
    for h, w in shapes:
        ys = (torch.arange(h, dtype=torch.float32, device=device) + 0.5) / h
        xs = (torch.arange(w, dtype=torch.float32, device=device) + 0.5) / w
        yy, xx = torch.meshgrid(ys, xs, indexing='ij')
        points.append(torch.stack([xx.reshape(-1), yy.reshape(-1)], dim=-1))
    return torch.cat(points, 0)[None, :, None]


def deform_inputs(grid: tuple[int, int], device: torch.device) -> tuple[tuple[Tensor, Tensor, Tensor], ...]:
    """(reference points, spatial shapes, level start index) of the injector and of the extractor."""

    def level_args(shapes: list[tuple[int, int]]) -> tuple[Tensor, Tensor]:
        spatial = torch.as_tensor(shapes, dtype=torch.long, device=device)
        start = torch.cat([spatial.new_zeros(1), spatial.prod(1).cumsum(0)[:-1]])
        return spatial, start

    prior = prior_shapes(grid)
    injector = (reference_points([grid], device), *level_args(prior))
    extractor = (reference_points(prior, device), *level_args([grid]))
    return injector, extractor


class DWConv(nn.Module):
    """3x3 depth-wise conv applied to each of the prior's three levels: (B, N, C) -> (B, N, C). Parameter ``dwconv``."""

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dims, dims, 3, 1, 1, bias=True, groups=dims)

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        b, _, c = x.shape
        shapes = prior_shapes(grid)
        parts = x.split([h * w for h, w in shapes], dim=1)
        out = [self.dwconv(p.transpose(1, 2).reshape(b, c, h, w)).flatten(2).transpose(1, 2)
               for p, (h, w) in zip(parts, shapes)]
        return torch.cat(out, dim=1)


class ConvFFN(nn.Module):
    """CFFN: ``fc2(drop(gelu(dwconv(fc1(x)))))`` over the prior tokens, hidden width ``hidden_dims``."""

    def __init__(self, dims: int, hidden_dims: int, drop: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dims, hidden_dims)
        self.dwconv = DWConv(hidden_dims)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dims, dims)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor, grid: tuple[int, int]) -> Tensor:
        x = self.drop(self.act(self.dwconv(self.fc1(x), grid)))
        return self.drop(self.fc2(x))


def _deform_attn(dims: int, num_heads: int, num_levels: int, num_points: int, ratio: float) -> nn.Module:
    """The deformable attention with the official ``MSDeformAttn``'s layout: batch first, no dropout."""
    return PortableMSDeformAttn(embed_dims=dims, num_heads=num_heads, num_levels=num_levels, num_points=num_points,
                                dropout=0.0, batch_first=True, value_proj_ratio=ratio)


class Injector(nn.Module):
    """ViT tokens (B, hw, C) attend to the prior (B, N_c, C): ``x + gamma * attn(query_norm(x), feat_norm(c))``."""

    def __init__(self, dims: int, num_heads: int, num_points: int, deform_ratio: float, init_values: float,
                 with_cp: bool = False) -> None:
        super().__init__()
        self.with_cp = with_cp
        self.query_norm = nn.LayerNorm(dims, eps=1e-6)
        self.feat_norm = nn.LayerNorm(dims, eps=1e-6)
        self.attn = _deform_attn(dims, num_heads, len(PRIOR_SCALES), num_points, deform_ratio)
        self.gamma = nn.Parameter(init_values * torch.ones(dims))

    def _forward(self, x: Tensor, c: Tensor, points: Tensor, shapes: Tensor, start: Tensor) -> Tensor:
        attn = self.attn(query=self.query_norm(x), value=self.feat_norm(c), identity=x.new_zeros(()),
                         reference_points=points, spatial_shapes=shapes, level_start_index=start)
        return x + self.gamma * attn

    def forward(self, x: Tensor, c: Tensor, points: Tensor, shapes: Tensor, start: Tensor) -> Tensor:
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self._forward, x, c, points, shapes, start, use_reentrant=False)
        return self._forward(x, c, points, shapes, start)


class Extractor(nn.Module):
    """The prior (B, N_c, C) attends to the ViT tokens (B, hw, C), then an optional CFFN."""

    def __init__(self, dims: int, num_heads: int, num_points: int, deform_ratio: float, with_cffn: bool,
                 cffn_ratio: float, drop: float = 0.0, drop_path: float = 0.0, with_cp: bool = False) -> None:
        super().__init__()
        self.with_cp = with_cp
        self.query_norm = nn.LayerNorm(dims, eps=1e-6)
        self.feat_norm = nn.LayerNorm(dims, eps=1e-6)
        self.attn = _deform_attn(dims, num_heads, 1, num_points, deform_ratio)
        self.with_cffn = with_cffn
        if with_cffn:
            self.ffn = ConvFFN(dims, int(dims * cffn_ratio), drop=drop)
            self.ffn_norm = nn.LayerNorm(dims, eps=1e-6)
            self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def _forward(self, c: Tensor, x: Tensor, points: Tensor, shapes: Tensor, start: Tensor,
                 grid: tuple[int, int]) -> Tensor:
        c = self.attn(query=self.query_norm(c), value=self.feat_norm(x), identity=c, reference_points=points,
                      spatial_shapes=shapes, level_start_index=start)
        if self.with_cffn:
            c = c + self.drop_path(self.ffn(self.ffn_norm(c), grid))
        return c

    def forward(self, c: Tensor, x: Tensor, points: Tensor, shapes: Tensor, start: Tensor,
                grid: tuple[int, int]) -> Tensor:
        if self.with_cp and c.requires_grad:
            return cp.checkpoint(self._forward, c, x, points, shapes, start, grid, use_reentrant=False)
        return self._forward(c, x, points, shapes, start, grid)


class InteractionBlock(nn.Module):
    """Injector -> the backbone's blocks (``run_blocks(tokens) -> tokens``) -> extractor(s)."""

    def __init__(self, dims: int, num_heads: int, num_points: int, init_values: float, drop_path: float,
                 with_cffn: bool, cffn_ratio: float, deform_ratio: float, extra_extractor: bool,
                 with_cp: bool = False) -> None:
        super().__init__()
        self.injector = Injector(dims, num_heads, num_points, deform_ratio, init_values, with_cp=with_cp)
        extractor = dict(dims=dims, num_heads=num_heads, num_points=num_points, deform_ratio=deform_ratio,
                         with_cffn=with_cffn, cffn_ratio=cffn_ratio, drop_path=drop_path, with_cp=with_cp)
        self.extractor = Extractor(**extractor)
        self.extra_extractors = nn.Sequential(*[Extractor(**extractor) for _ in range(2)]) if extra_extractor \
            else None

    def forward(self, x: Tensor, c: Tensor, cls: Tensor, run_blocks: Callable[[Tensor], Tensor], inputs: tuple,
                grid: tuple[int, int]) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, hw, C) patch tokens, c (B, N_c, C) prior, cls (B, 1, C); ``inputs`` = :func:`deform_inputs`."""
        inj, ext = inputs
        x = self.injector(x, c, *inj)
        x = run_blocks(torch.cat([cls, x], dim=1))
        cls, x = x[:, :1], x[:, 1:]
        c = self.extractor(c, x, *ext, grid)
        for extractor in self.extra_extractors or ():
            c = extractor(c, x, *ext, grid)
        return x, c, cls


class SpatialPriorModule(nn.Module):
    """A ResNet-like stem: (B, 3, H, W) -> c1 (B, C, H/4, W/4) and tokens c2, c3, c4
    (B, H/s * W/s, C) at strides 8, 16, 32."""

    def __init__(self, inplanes: int, embed_dims: int, norm_cfg: dict) -> None:
        super().__init__()

        def conv_norm_relu(cin: int, cout: int, stride: int) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), build_norm_layer(norm_cfg, cout)[1],
                    nn.ReLU(inplace=True)]

        self.stem = nn.Sequential(*conv_norm_relu(3, inplanes, 2), *conv_norm_relu(inplanes, inplanes, 1),
                                  *conv_norm_relu(inplanes, inplanes, 1), nn.MaxPool2d(3, 2, 1))
        self.conv2 = nn.Sequential(*conv_norm_relu(inplanes, 2 * inplanes, 2))
        self.conv3 = nn.Sequential(*conv_norm_relu(2 * inplanes, 4 * inplanes, 2))
        self.conv4 = nn.Sequential(*conv_norm_relu(4 * inplanes, 4 * inplanes, 2))
        self.fc1 = nn.Conv2d(inplanes, embed_dims, 1)
        self.fc2 = nn.Conv2d(2 * inplanes, embed_dims, 1)
        self.fc3 = nn.Conv2d(4 * inplanes, embed_dims, 1)
        self.fc4 = nn.Conv2d(4 * inplanes, embed_dims, 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        c1 = self.stem(x)
        c2 = self.conv2(c1)
        c3 = self.conv3(c2)
        c4 = self.conv4(c3)
        return (self.fc1(c1), *(fc(c).flatten(2).transpose(1, 2) for fc, c in
                                ((self.fc2, c2), (self.fc3, c3), (self.fc4, c4))))


def init_adapter_weights(module: nn.Module) -> None:
    """Official ``_init_weights`` then ``_init_deform_weights``: trunc-normal Linear, unit norms,
    fan-out normal convs, the deformable attentions' own init."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.LayerNorm, nn.modules.batchnorm._BatchNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
            nn.init.normal_(m.weight, 0.0, (2.0 / fan_out) ** 0.5)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    for m in module.modules():
        if isinstance(m, PortableMSDeformAttn):
            m.init_weights()
