"""BEiT masked image modeling (Bao et al. 2022; unilm ``beit/engine_for_pretraining.py``), a thin composition.

    loss(inputs) = head.loss( backbone.forward_tokens(images, mask)[-1][:, 1:],
                              no_grad(target_generator.get_token_ids(target_images)), mask )

- ``backbone``: ``beit_mm.BEiT`` with ``with_mask_token=True`` (masked patch embeddings -> ``mask_token``),
  ``final_norm=True``, ``out_indices=(-1,)``; BEiT pretraining uses ``use_shared_rel_pos_bias=True`` and layer scale
  0.1 (B) / 1e-5 (L).
- ``target_generator``: a frozen tokenizer with ``get_token_ids(x) -> (B, h * w)`` (``beit_mm.DALLEEncoder``, weights
  by ``init_cfg=dict(type='Pretrained', checkpoint=...)`` from ``beit_mm.converters.dalle``'s plain state dict).
- ``head``: ``beit_mm.BEiTMIMHead`` (``lm_head``), cross-entropy at masked positions; logs ``loss`` and ``mim_acc``.

Every trainable parameter takes part in every step (mask token through the blend, shared bias, final norm,
``lm_head``), so DDP needs no ``find_unused_parameters``. The tokenizer is frozen and in eval mode.
Checkpoints saved by MMEngine keep the backbone under ``backbone.``: fine-tuning configs load them with
``beit_mm.BEiT(init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.'))``, which copies the shared
relative position bias into every block and resamples it to the new grid.
"""
from __future__ import annotations

import torch
from mmengine.model import BaseModel
from torch import Tensor, nn

from beit_mm.registry import MODELS


@MODELS.register_module()
class BEiTPretrain(BaseModel):
    """BEiT masked image modeling: backbone + MIM head, targets from a frozen tokenizer.

    Args:
        backbone: config of a ``beit_mm.BEiT`` with ``with_mask_token=True`` and ``final_norm=True``.
        head: config of a ``beit_mm.BEiTMIMHead``.
        target_generator: config of the tokenizer (``beit_mm.DALLEEncoder``).
        data_preprocessor: config of ``beit_mm.MIMDataPreprocessor`` (required: it builds the two views and masks).
        init_cfg: for the whole model (usually None: parts carry their own ``init_cfg``).
    """

    def __init__(self,
                 backbone: dict,
                 head: dict,
                 target_generator: dict,
                 data_preprocessor: dict | nn.Module | None = None,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            raise ValueError('BEiTPretrain needs data_preprocessor=dict(type="beit_mm.MIMDataPreprocessor", mean=..., '
                             'std=...) to batch the two views and the masks')
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        self.head = MODELS.build(head)
        self.target_generator = MODELS.build(target_generator)
        if getattr(self.backbone, 'mask_token', None) is None:
            raise ValueError('the MIM backbone has no mask token; build it with with_mask_token=True')
        if not getattr(self.backbone, 'final_norm', False):
            raise ValueError('BEiT pretraining classifies final-normed tokens; build the backbone with final_norm=True')
        if self.backbone.out_indices[-1] != self.backbone.num_layers - 1:
            raise ValueError(f'the last out index must be the last block ({self.backbone.num_layers - 1}), got '
                             f'out_indices={self.backbone.out_indices}; use out_indices=(-1,)')
        self.head.check_fits(self.backbone.embed_dims, 'backbone width', self.target_generator)

    def forward(self, inputs: dict[str, Tensor], data_samples: list | None = None, mode: str = 'loss'):
        """``mode='loss'``: :meth:`loss`; ``mode='tensor'``: :meth:`extract_feat` of ``inputs['images']``."""
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'tensor':
            return self.extract_feat(inputs['images'], inputs.get('mask'))
        raise ValueError(f'BEiTPretrain supports mode "loss" or "tensor", got {mode!r}: a MIM model makes no '
                         'predictions to evaluate; fine-tune the backbone instead')

    def extract_feat(self, images: Tensor, mask: Tensor | None = None) -> Tensor:
        """(B, 3, H, W) images (+ optional (B, h, w) mask) -> (B, 1 + h * w, C) final-normed tokens."""
        return self.backbone.forward_tokens(images, mask)[0][-1]

    def loss(self, inputs: dict[str, Tensor], data_samples: list | None = None) -> dict[str, Tensor]:
        """MIM loss and accuracy.

        Args:
            inputs: ``images`` (B, 3, H, W) normalized backbone view; ``target_images`` (B, 3, h', w') tokenizer view
                in its pixel space; ``mask`` (B, H/p, W/p) bool, True = masked (see ``MIMDataPreprocessor``).
            data_samples: unused (the preprocessor already took the masks out of them).
        Returns:
            ``loss`` (cross-entropy at masked positions) and ``mim_acc``.
        """
        images, target_images, mask = inputs['images'], inputs['target_images'], inputs['mask']
        tokens = self.extract_feat(images, mask)[:, 1:]  # (B, N, C), cls token dropped
        with torch.no_grad():
            target = self.target_generator.get_token_ids(target_images)  # (B, N)
        return self.head.loss(tokens, target, mask.flatten(1))

    def get_layer_depth(self, param_name: str) -> tuple[int, int]:
        """Layer id for layer-wise lr decay, asked of the backbone (head and tokenizer -> the last id)."""
        return self.backbone.get_layer_depth(param_name, prefix='backbone.')
