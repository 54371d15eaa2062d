"""BEiT-style masked image modeling for CvT (no toolkit has it; design note: ``docs/cvt_mim.md``).

    mask_0  = upsample_mask(mask, stage-0 grid)                 (B, 14, 14) -> (B, 56, 56), nearest x4
    images  = images * ~upsample_mask(mask, (H, W))             only with zero_masked_pixels (the default)
    tokens  = backbone(images, mask_0)[-1]                      stage-0 tokens at mask_0 -> stage0.mask_token;
                                                                 final-normed stage-2 map (B, C_2, 14, 14)
    loss    = head.loss(tokens.flatten(2).mT, no_grad(target_generator.get_token_ids(target_images)), mask)

The patch mask of ``BEiTMaskGenerator`` (16 px patches, 14x14 for 224 px) is upsampled to CvT's stage-0 token grid
(stride 4) and the masked stage-0 tokens are replaced by a learned mask token right after ``stage0.patch_embed``. The
last stage's 14x14 grid (stride 16) is aligned one-to-one with the patch grid and with the dVAE's 14x14 token grid of
the 112 px tokenizer view, so ``BEiTMIMHead`` classifies the stage-2 tokens at the masked patches. The stage-2 cls
token takes part in attention but not in the loss.

What leaks, and what not (``docs/cvt_mim.md`` has the numbers):

- Context mixing after the mask is wanted: the overlapping stage-1/2 embeddings (k3 s2 p1), the depthwise 3x3 conv
  projections and global attention let a masked position see its visible neighbours, as attention does in BEiT.
- The input leak: stage 0 embeds with k7 s4 p2, so a visible stage-0 token next to a masked 16 px patch reads rows
  (columns) 0, 14 and 15 of that patch (``beit_mm.models.layers.mask_utils.leaked_pixels``): 87 of 256 pixels of an
  isolated masked patch, 5 % of all masked pixels under BEiT's blockwise masking (75 of 196, blocks >= 16 patches;
  half of the masked patches have no leaked pixel) against 21 % under random patch masking. Pixels of rows and
  columns 1-13 of a masked patch reach nothing at all: not the loss, not any output, not even BatchNorm's batch
  statistics in training mode (only the replaced masked tokens read them).
- ``zero_masked_pixels=True`` (default) closes the leak: the pixels of masked patches are set to 0 (the normalized
  mean colour) before the embedding, so the loss does not depend on any pixel of a masked patch. The price is that
  visible tokens next to a masked patch see 1-3 grey rows of their 7x7 window during pretraining only.

Every trainable parameter takes part in every step (the mask token through ``torch.where`` at >= 1 masked position,
the stage-2 cls token through attention, the final norm, ``lm_head``), so DDP needs no ``find_unused_parameters``.
The checkpoints keep the backbone under ``backbone.``: fine-tuning loads them with
``beit_mm.CvT(init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.'))`` (``stage0.mask_token`` is
reported as unused there).
"""
from __future__ import annotations

import torch
from mmengine.model import BaseModel
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ..layers.mask_utils import conv_output_size, upsample_mask


@MODELS.register_module()
class CvTPretrain(BaseModel):
    """Masked image modeling with a CvT backbone: mask token at stage 0, BEiT's MIM head on the stage-2 grid.

    Args:
        backbone: config of a ``beit_mm.CvT`` with ``with_mask_token=True``, ``final_norm=True``,
            ``out_type='featmap'`` and ``out_indices=(2,)`` (the stride-16 stage-2 map).
        head: config of a ``beit_mm.BEiTMIMHead`` with ``embed_dims`` = the stage-2 width.
        target_generator: config of the tokenizer (``beit_mm.DALLEEncoder``): ``get_token_ids`` of the tokenizer view
            must give one id per 16 px patch (112 px view / 8 for 224 px images).
        data_preprocessor: config of ``beit_mm.MIMDataPreprocessor`` (required: it batches the two views and masks).
        zero_masked_pixels: set the pixels of masked patches to 0 before the stage-0 embedding, so that no visible
            stage-0 token reads them (see the module docstring). False keeps the images and leaks rows/columns
            0, 14, 15 of a masked patch next to a visible one.
        init_cfg: for the whole model (usually None: parts carry their own ``init_cfg``).
    """

    def __init__(self,
                 backbone: dict,
                 head: dict,
                 target_generator: dict,
                 data_preprocessor: dict | nn.Module | None = None,
                 zero_masked_pixels: bool = True,
                 init_cfg: dict | None = None) -> None:
        if data_preprocessor is None:
            raise ValueError('CvTPretrain needs data_preprocessor=dict(type="beit_mm.MIMDataPreprocessor", mean=..., '
                             'std=...) to batch the two views and the masks')
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        self.head = MODELS.build(head)
        self.target_generator = MODELS.build(target_generator)
        self.zero_masked_pixels = zero_masked_pixels
        if getattr(self.backbone.stage0, 'mask_token', None) is None:
            raise ValueError('the MIM backbone has no mask token; build beit_mm.CvT with with_mask_token=True')
        if self.backbone.out_type != 'featmap' or tuple(self.backbone.out_indices) != (2, ):
            raise ValueError(f"CvT MIM predicts from the stage-2 map; build the backbone with out_type='featmap', "
                             f'out_indices=(2,) (got {self.backbone.out_type!r}, {self.backbone.out_indices})')
        if self.backbone.norm is None:
            raise ValueError('CvT MIM classifies final-normed stage-2 tokens; build the backbone with final_norm=True')
        self.head.check_fits(self.backbone.embed_dims[-1], 'stage-2 width', self.target_generator)

    def forward(self, inputs: dict[str, Tensor], data_samples: list | None = None, mode: str = 'loss'):
        """``mode='loss'``: :meth:`loss`; ``mode='tensor'``: :meth:`extract_feat` of ``inputs['images']``."""
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'tensor':
            return self.extract_feat(inputs['images'], inputs.get('mask'))
        raise ValueError(f'CvTPretrain supports mode "loss" or "tensor", got {mode!r}: a MIM model makes no '
                         'predictions to evaluate; fine-tune the backbone instead')

    def stage0_grid(self, image_size: tuple[int, int]) -> tuple[int, int]:
        """(H_0, W_0) of the stage-0 token embedding for (H, W) images (56x56 for 224x224)."""
        conv = self.backbone.stage0.patch_embed.proj
        return tuple(conv_output_size(n, conv.kernel_size[i], conv.stride[i], conv.padding[i])
                     for i, n in enumerate(image_size))

    def extract_feat(self, images: Tensor, mask: Tensor | None = None) -> Tensor:
        """Final-normed stage-2 tokens, cls token excluded.

        Args:
            images: (B, 3, H, W) normalized backbone view.
            mask: (B, h, w) bool patch mask, True = masked (h = H / 16 for CvT's stride-16 stage 2), or None.
        Returns:
            (B, h * w, C_2), row-major like the mask.
        """
        mask_0 = None
        if mask is not None:
            mask_0 = upsample_mask(mask, self.stage0_grid(images.shape[2:]))  # (B, H_0, W_0)
            if self.zero_masked_pixels:
                images = images * ~upsample_mask(mask, images.shape[2:]).unsqueeze(1)
        feat = self.backbone(images, mask_0)[-1]  # (B, C_2, h_2, w_2)
        if mask is not None and feat.shape[2:] != mask.shape[1:]:
            raise ValueError(f'the stage-2 grid {tuple(feat.shape[2:])} differs from the mask grid '
                             f'{tuple(mask.shape[1:])}; CvT MIM needs 16 px mask patches (BEiTMaskGenerator '
                             'input_size = image size // 16)')
        return feat.flatten(2).transpose(1, 2)

    def loss(self, inputs: dict[str, Tensor], data_samples: list | None = None) -> dict[str, Tensor]:
        """MIM loss and accuracy.

        Args:
            inputs: ``images`` (B, 3, H, W) normalized backbone view; ``target_images`` (B, 3, h', w') tokenizer view
                in its pixel space; ``mask`` (B, H/16, W/16) bool, True = masked (see ``MIMDataPreprocessor``).
            data_samples: unused (the preprocessor already took the masks out of them).
        Returns:
            ``loss`` (cross-entropy at masked positions) and ``mim_acc``.
        """
        images, target_images, mask = inputs['images'], inputs['target_images'], inputs['mask']
        tokens = self.extract_feat(images, mask)  # (B, N, C_2)
        with torch.no_grad():
            target = self.target_generator.get_token_ids(target_images)  # (B, N)
        return self.head.loss(tokens, target, mask.flatten(1))

    def get_layer_depth(self, param_name: str) -> tuple[int, int]:
        """Layer id for layer-wise lr decay, asked of the backbone (mask token -> 0; head, tokenizer -> the last)."""
        return self.backbone.get_layer_depth(param_name, prefix='backbone.')
