"""BEiT's MIM head (unilm ``beit/modeling_pretrain.py``): ``lm_head`` on masked tokens, cross-entropy to token ids.

With BEiT v2's cls pretraining the same ``lm_head`` classifies the cls-pretraining tokens too, and the losses add.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from mmengine.logging import MMLogger
from mmengine.model import BaseModule
from torch import Tensor, nn

from beit_mm.registry import MODELS

from ...fileio import load_state_dict_file
from ..layers.weight_init import trunc_normal_within_std_
from ..tokenizers.dalle import DALLE_VOCAB_SIZE

# label of the unmasked positions, which the cross-entropy skips
IGNORE_INDEX = -100


@MODELS.register_module()
class BEiTMIMHead(BaseModule):
    """Linear(C, vocab_size) on masked patch tokens, cross-entropy and masked-token accuracy.

    Args:
        embed_dims, vocab_size: token width C and number of visual tokens.
        init_cfg: None (unilm's init) or ``dict(type='Pretrained', checkpoint=PATH, prefix='')`` loading ``lm_head.*``.
    """

    def __init__(self, embed_dims: int, vocab_size: int = DALLE_VOCAB_SIZE, init_cfg: dict | None = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.embed_dims = embed_dims
        self.vocab_size = vocab_size
        self.lm_head = nn.Linear(embed_dims, vocab_size)

    def check_fits(self, width: int, target_generator: nn.Module) -> None:
        """Raise unless the head reads ``width``-wide tokens and predicts the tokenizer's vocabulary."""
        if self.embed_dims != width:
            raise ValueError(f"head.embed_dims={self.embed_dims} != the backbone's masked-token width {width}")
        vocab = getattr(target_generator, 'vocab_size', None)
        if vocab is None:
            raise ValueError(f'BEiTMIMHead classifies visual token ids, but the target generator '
                             f'{type(target_generator).__name__} has no vocabulary; use a tokenizer '
                             '(beit_mm.DALLEEncoder) or the pixel head (beit_mm.PixelRegressionHead)')
        if vocab != self.vocab_size:
            raise ValueError(f'head.vocab_size={self.vocab_size} != tokenizer vocab_size={vocab}')

    def init_weights(self) -> None:
        if self.init_cfg is None:
            with torch.no_grad():
                trunc_normal_within_std_(self.lm_head.weight)
                nn.init.zeros_(self.lm_head.bias)
            return
        if not (isinstance(self.init_cfg, dict) and self.init_cfg.get('type') == 'Pretrained'):
            raise ValueError(f'BEiTMIMHead supports init_cfg=None or dict(type="Pretrained", checkpoint=PATH, '
                             f'prefix=""), got {self.init_cfg}')
        prefix = self.init_cfg.get('prefix') or ''
        state_dict = load_state_dict_file(self.init_cfg['checkpoint'])
        keys = {f'{prefix}lm_head.weight': 'weight', f'{prefix}lm_head.bias': 'bias'}
        missing = [k for k in keys if k not in state_dict]
        if missing:
            raise KeyError(f'{self.init_cfg["checkpoint"]} lacks {missing}: convert unilm files with '
                           'tools/convert_checkpoint.py --keep-mim-head, or set init_cfg.prefix="head." for a beit_mm '
                           'MIM checkpoint')
        self.lm_head.load_state_dict({name: state_dict[key] for key, name in keys.items()})
        MMLogger.get_current_instance().info(f'loaded lm_head from {self.init_cfg["checkpoint"]}')
        self._is_init = True

    def forward(self, tokens: Tensor) -> Tensor:
        """Vocabulary logits of tokens: (..., C) -> (..., vocab_size)."""
        return self.lm_head(tokens)

    def loss(self, patch_tokens: Tensor | tuple[Tensor, Tensor], target: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """Cross-entropy and accuracy at masked positions.

        Args:
            patch_tokens: (B, N, C), or BEiT v2's pair (backbone, cls-pretraining tokens).
            target: (B, N) int64 token ids.
            mask: (B, N) or (B, h, w) bool, True = masked.
        Returns:
            ``loss``, ``mim_acc``, ``mim_acc_baseline``; for a pair also ``loss_cls_pt`` and ``mim_acc_cls_pt``.
        """
        if isinstance(patch_tokens, (tuple, list)):
            tokens, cls_pt_tokens = patch_tokens
            out = self.loss(tokens, target, mask)
            cls_pt = self.loss(cls_pt_tokens, target, mask)
            return dict(out, loss_cls_pt=cls_pt['loss'], mim_acc_cls_pt=cls_pt['mim_acc'])
        b, n, _ = patch_tokens.shape
        mask = mask.reshape(b, -1)
        if mask.shape[1] != n or target.shape != (b, n):
            raise ValueError(f'patch tokens {tuple(patch_tokens.shape)}, target {tuple(target.shape)} and mask '
                             f'{tuple(mask.shape)} disagree on (B, N); the tokenizer view must give one token per '
                             'patch (e.g. 112 px for DALL-E with 224 px / 16 px patches)')
        # static shapes (no host sync): classify every position, ignore the unmasked; M = 0 gives NaN
        logits = self.lm_head(patch_tokens)  # (B, N, vocab_size)
        labels = torch.where(mask, target, IGNORE_INDEX)
        num_masked = mask.sum()
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX,
                               reduction='sum') / num_masked
        with torch.no_grad():
            acc = ((logits.argmax(-1) == target) & mask).sum() / num_masked
            counts = torch.zeros(self.vocab_size, device=target.device).index_add_(
                0, target.flatten(), mask.flatten().float())
            baseline = counts.max() / num_masked
        return dict(loss=loss, mim_acc=acc, mim_acc_baseline=baseline)
