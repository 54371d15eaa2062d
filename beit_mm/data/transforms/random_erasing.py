"""mmpretrain's ``RandomErasing``: the box drawn on the worker, the fill made on the device (``mode='rand'`` noise
from torch's RNG)."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from mmcv.transforms import BaseTransform
from torch import Tensor

from beit_mm.registry import TRANSFORMS


@TRANSFORMS.register_module()
class SampleRandomErasing(BaseTransform):
    """mmpretrain ``RandomErasing``'s draws into ``results[key]``: None or ``dict(box, mode, fill_color, fill_std)``.

    Args:
        erase_prob, min_area_ratio, max_area_ratio, aspect_range, mode, fill_color, fill_std: as mmpretrain's
            ``RandomErasing``.
    """

    key = 'random_erasing'

    def __init__(self, erase_prob=0.5, min_area_ratio=0.02, max_area_ratio=0.4, aspect_range=(3 / 10, 10 / 3),
                 mode='const', fill_color=(128, 128, 128), fill_std=None) -> None:
        from mmpretrain.datasets.transforms import RandomErasing
        self.reference = RandomErasing(erase_prob=erase_prob, min_area_ratio=min_area_ratio,
                                       max_area_ratio=max_area_ratio, aspect_range=aspect_range, mode=mode,
                                       fill_color=fill_color, fill_std=fill_std)

    def transform(self, results: dict) -> dict:
        ref = self.reference
        erasing = None
        if not ref.random_disable():
            h, w = results['img_shape'][:2]
            erasing = dict(box=tuple(int(v) for v in ref.random_patch(h, w)), mode=ref.mode,
                           fill_color=tuple(float(v) for v in ref.fill_color),
                           fill_std=None if ref.fill_std is None else tuple(float(v) for v in ref.fill_std))
        results[self.key] = erasing
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.reference!r})'


def random_erasing(images: Tensor, params: Sequence[dict | None]) -> Tensor:
    """mmpretrain ``RandomErasing``'s fill of each image's drawn box, the noise from torch's RNG on the device.

    Args:
        images: (N, 3, H, W) uint8 BGR.
        params: per image None or the drawn ``dict(box=(top, left, h, w), mode, fill_color, fill_std)``.
    """
    out = images.clone()
    for i, p in enumerate(params):
        if p is None:
            continue
        top, left, h, w = p['box']
        fill = torch.tensor(p['fill_color'], dtype=torch.float64, device=out.device).view(3, 1, 1)
        if p['mode'] == 'const':
            patch = fill.to(torch.uint8).expand(3, h, w)
        elif p.get('fill_std') is None:
            patch = torch.empty((3, h, w), dtype=torch.float64, device=out.device).uniform_(0, 256).to(torch.uint8)
        else:
            std = torch.tensor(p['fill_std'], dtype=torch.float64, device=out.device).view(3, 1, 1)
            noise = torch.randn((3, h, w), dtype=torch.float64, device=out.device) * std + fill
            patch = noise.to(torch.int32).clamp_(0, 255).to(torch.uint8)
        out[i, :, top:top + h, left:left + w] = patch
    return out
