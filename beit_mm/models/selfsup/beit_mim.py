"""BEiT masked image modeling (Bao et al. 2022; unilm ``beit/engine_for_pretraining.py``), one algorithm for every
backbone, target and masking, composed of registered parts:

    images  = images * ~upsample_mask(mask, (H, W))             only with zero_masked_pixels (the default)
    tokens  = backbone.forward_masked(images, mask)             (B, N, C) final-normed tokens on the patch grid
                                                                (BEiT v2: a pair, + the cls-pretraining tokens)
    target  = no_grad(target_generator.get_targets(inputs))     from the unmasked views
    losses  = head.loss(tokens, target, mask)                   at masked positions only

Each part is checked at build time to fit the others: the backbone's ``masked_token_dims`` and
``check_forward_masked()``, the head's ``check_fits(width, target_generator)``. ``zero_masked_pixels`` matters for
CvT only, whose overlapping stage-0 convolution would otherwise read pixels of masked patches.
"""
from __future__ import annotations

import torch
from mmengine.model import BaseModel
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ..layers.mask_utils import upsample_mask


@MODELS.register_module()
class BEiTPretrain(BaseModel):
    """Masked image modeling: backbone + head, targets from a frozen target generator.

    Args:
        backbone: config of a backbone with ``forward_masked`` (``beit_mm.BEiT`` or ``beit_mm.CvT``).
        head: config of ``beit_mm.BEiTMIMHead`` (token ids) or ``beit_mm.PixelRegressionHead`` (pixels).
        target_generator: config of ``beit_mm.DALLEEncoder``, ``beit_mm.VQKD`` or ``beit_mm.PatchPixelTarget``.
        data_preprocessor: config of ``beit_mm.MIMDataPreprocessor`` (required).
        zero_masked_pixels: zero the pixels of masked patches before the backbone.
        init_cfg: for the whole model.

    Raises:
        ValueError: no data preprocessor, or parts that do not fit.
    """

    def __init__(self,
                 backbone: dict,
                 head: dict,
                 target_generator: dict,
                 data_preprocessor: dict | nn.Module | None = None,
                 zero_masked_pixels: bool = True,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            raise ValueError('BEiTPretrain needs data_preprocessor=dict(type="beit_mm.MIMDataPreprocessor", mean=..., '
                             'std=...) to batch the two views and the masks')
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        self.head = MODELS.build(head)
        self.target_generator = MODELS.build(target_generator)
        self.zero_masked_pixels = zero_masked_pixels
        if not hasattr(self.backbone, 'forward_masked'):
            raise ValueError(f'{type(self.backbone).__name__} has no forward_masked(images, mask); use beit_mm.BEiT '
                             'or beit_mm.CvT with with_mask_token=True')
        self.backbone.check_forward_masked()
        if getattr(self.backbone, 'cls_pt_layers', None) is not None and not hasattr(self.head, 'lm_head'):
            raise ValueError(f'BEiT v2 cls-token pretraining (backbone cls_pretrain) classifies both token sets with '
                             f'one shared lm_head; {type(self.head).__name__} has none: use beit_mm.BEiTMIMHead')
        self.head.check_fits(self.backbone.masked_token_dims, self.target_generator)

    def forward(self, inputs: dict[str, Tensor], data_samples: list | None = None, mode: str = 'loss'):
        """``mode='loss'``: :meth:`loss`; ``mode='tensor'``: :meth:`extract_feat` of ``inputs['images']``."""
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'tensor':
            return self.extract_feat(inputs['images'], inputs['mask'])
        raise ValueError(f'BEiTPretrain supports mode "loss" or "tensor", got {mode!r}: a MIM model makes no '
                         'predictions to evaluate; fine-tune the backbone instead')

    def extract_feat(self, images: Tensor, mask: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        """Images (B, 3, H, W) and mask (B, h, w) bool, True = masked -> tokens (B, h * w, C)."""
        if self.zero_masked_pixels:
            images = images * ~upsample_mask(mask, images.shape[2:]).unsqueeze(1)
        return self.backbone.forward_masked(images, mask)

    def loss(self, inputs: dict[str, Tensor], data_samples: list | None = None) -> dict[str, Tensor]:
        """MIM losses and metrics.

        Args:
            inputs: ``images`` (B, 3, H, W), ``target_images`` (B, 3, h', w') float RGB 0..255, ``mask`` (B, h, w) bool.
            data_samples: unused.
        Returns:
            the head's losses and metrics.
        """
        mask = inputs['mask']
        with torch.no_grad():
            target = self.target_generator.get_targets(inputs)
        tokens = self.extract_feat(inputs['images'], mask)
        return self.head.loss(tokens, target, mask.flatten(1))

    def get_layer_depth(self, param_name: str) -> tuple[int, int]:
        """Layer id for layer-wise lr decay, asked of the backbone (head and target generator -> the last id)."""
        return self.backbone.get_layer_depth(param_name, prefix='backbone.')
