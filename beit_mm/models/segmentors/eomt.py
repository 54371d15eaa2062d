"""EoMT, the encoder-only mask transformer (Kerssies et al., CVPR 2025), on beit_mm's BEiT and DINOv3.

``K`` learnable queries join the tokens before the last ``L2`` blocks. Before each of those blocks and after the
last, the final-normed queries give class logits ``(B, K, C + 1)`` and mask logits ``(B, K, H/4, W/4)``; in the
masked blocks a query attends only to the patches inside its predicted mask (:mod:`.mask_annealing`). Semantic
segmentation is ``sum_q softmax(class)_q,c x sigmoid(mask)_q`` per pixel. Source:
github.com/tue-mps/eomt@7bd19ddd621c5c6adedcd260458a34783cd4a45f (``models/eomt.py``, ``training/``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from mmdet.structures.mask import mask2bbox
from mmengine.config import ConfigDict
from mmengine.structures import InstanceData, PixelData
from mmseg.models.segmentors import EncoderDecoder
from mmseg.models.segmentors.base import BaseSegmentor
from torch import Tensor, nn

from beit_mm.registry import MODELS

from .mask_annealing import anneal_attention_mask, mask_probabilities
from .mask_postprocess import OriginalSize, instance_results, panoptic_segments
from ..losses.mask_classification import panoptic_targets, semantic_targets

TASKS = ('semantic', 'panoptic', 'instance')


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of (B, C, H, W) maps (timm's ``LayerNorm2d``, eps 1e-6)."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__(channels, eps=eps)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


class ScaleBlock(nn.Module):
    """2x upsampling of (B, C, H, W): ConvTranspose2d -> GELU -> depthwise 3x3 conv -> LayerNorm2d (official)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.ConvTranspose2d(channels, channels, kernel_size=2, stride=2)
        self.act = nn.GELU()
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels, bias=False)
        self.norm = LayerNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.conv2(self.act(self.conv1(x))))


@MODELS.register_module()
class EoMT(EncoderDecoder):
    """EoMT segmentor with mmseg's segmentor interface.

    Args:
        backbone: a ``beit_mm.BEiT`` or ``beit_mm.DINOv3`` config with ``final_norm=True`` and ``drop_path_rate=0``.
        num_classes: semantic classes ``C``; the class head has ``C + 1`` outputs, the last "no object".
        num_queries, num_blocks: ``K`` and ``L2``, the last blocks that see the queries.
        masked_attn: predict before each of the last ``L2`` blocks and mask their attention.
        mask_annealing: ``dict(start_steps=[...], end_steps=[...], poly_power=0.9)``, or None to keep masking.
        loss: the matching loss config; ``num_classes`` is filled in.
        ignore_index: label of ignored pixels in ``gt_sem_seg``.
        task: ``'semantic'`` (mmseg's data samples), ``'panoptic'`` or ``'instance'`` (mmdet's).
        num_things_classes: panoptic: thing labels are ``[0, T)``, stuff ``[T, C)``.
        mask_thresh, overlap_thresh, top_k_instances: panoptic and instance post-processing.
        data_preprocessor, train_cfg, test_cfg, init_cfg: as mmseg's ``EncoderDecoder``.

    Raises:
        ValueError: the backbone lacks a final norm or has drop path, or an argument is out of range.
    """

    #: Name prefixes of the weights inference reads: a checkpoint lacking one is refused.
    inference_weights = ('backbone.', 'q.', 'class_head.', 'mask_head.', 'upscale.', 'attn_mask_probs')

    #: Name prefixes of the weights that depend on the class set: a checkpoint without them fine-tunes on a new class
    #: set (the official ``load_ckpt_class_head=False``), these keeping the model's own init.
    class_set_weights = ('class_head.', )

    #: Whether the queries run through the backbone's last ``num_blocks`` blocks (else through a decoder's own).
    queries_join_backbone = True

    def __init__(self,
                 backbone: dict,
                 num_classes: int,
                 num_queries: int = 100,
                 num_blocks: int = 4,
                 masked_attn: bool = True,
                 mask_annealing: dict | None = None,
                 loss: dict | None = None,
                 ignore_index: int = 255,
                 task: str = 'semantic',
                 num_things_classes: int | None = None,
                 mask_thresh: float = 0.8,
                 overlap_thresh: float = 0.8,
                 top_k_instances: int = 100,
                 data_preprocessor: dict | None = None,
                 train_cfg: dict | None = None,
                 test_cfg: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        BaseSegmentor.__init__(self, data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone)
        if getattr(self.backbone, 'norm', None) is None:
            raise ValueError('EoMT predicts from the backbone\'s final norm; build the BEiT with final_norm=True '
                             '(BEiT pretraining checkpoints carry norm.weight/norm.bias)')
        if any(not isinstance(blk.drop_path, nn.Identity) for blk in self.backbone.blocks):
            raise ValueError('EoMT runs the blocks without drop path (official models/eomt.py:185-195); build the '
                             'backbone with drop_path_rate=0.0')
        depth = self.backbone.num_layers
        if self.queries_join_backbone and not 1 <= num_blocks <= depth:
            raise ValueError(f'num_blocks={num_blocks} must be in [1, {depth}] (the last blocks that see the queries)')
        self.num_classes = self.out_channels = num_classes
        self.num_queries, self.num_blocks, self.masked_attn = num_queries, num_blocks, masked_attn
        self.ignore_index = ignore_index
        if task not in TASKS:
            raise ValueError(f'task={task!r}: EoMT does {", ".join(TASKS)}')
        if task == 'panoptic' and not (num_things_classes is not None and 0 <= num_things_classes <= num_classes):
            raise ValueError(f'panoptic EoMT needs num_things_classes in [0, {num_classes}] (labels [0, T) are '
                             f'things, [T, {num_classes}) stuff, as mmdet\'s CocoPanopticDataset), got '
                             f'{num_things_classes}')
        self.task = task
        self.num_things_classes = num_classes if task == 'instance' else num_things_classes
        self.mask_thresh, self.overlap_thresh, self.top_k_instances = mask_thresh, overlap_thresh, top_k_instances
        self.align_corners = False
        self.train_cfg = train_cfg
        self.test_cfg = ConfigDict(test_cfg if test_cfg is not None else dict(mode='whole'))
        self.decode_head = None  # mmseg's interface: EoMT has no decode head; predictions come from the queries

        if mask_annealing is not None:
            extra = set(mask_annealing) - {'start_steps', 'end_steps', 'poly_power'}
            if extra or len(mask_annealing.get('start_steps', ())) != num_blocks:
                raise ValueError(f'mask_annealing={mask_annealing} needs start_steps and end_steps with one entry per '
                                 f'masked block ({num_blocks}) and optionally poly_power (0.9)')
            mask_probabilities(0, mask_annealing['start_steps'], mask_annealing['end_steps'],
                               mask_annealing.get('poly_power', 0.9))  # validates the schedule
        self.mask_annealing = mask_annealing
        self.register_buffer('attn_mask_probs', torch.ones(num_blocks))  # checkpointed, as the official buffer
        self.annealing_step: int | None = None

        dims = self.backbone.embed_dims
        self.q = nn.Embedding(num_queries, dims)
        self.class_head = nn.Linear(dims, num_classes + 1)
        self.mask_head = nn.Sequential(nn.Linear(dims, dims), nn.GELU(), nn.Linear(dims, dims), nn.GELU(),
                                       nn.Linear(dims, dims))
        num_upscale = max(1, int(math.log2(self.backbone.patch_size)) - 2)
        self.upscale = nn.Sequential(*[ScaleBlock(dims) for _ in range(num_upscale)])
        self.criterion = MODELS.build(dict(loss or dict(type='MaskClassificationLoss'), num_classes=num_classes))

    def set_annealing_step(self, step: int) -> None:
        """Set the masked blocks' probabilities for the forward after ``step`` optimizer steps."""
        self.annealing_step = step
        if self.mask_annealing is not None:
            probs = mask_probabilities(step, self.mask_annealing['start_steps'], self.mask_annealing['end_steps'],
                                       self.mask_annealing.get('poly_power', 0.9))
            self.attn_mask_probs.copy_(torch.tensor(probs, dtype=torch.float32))

    def _predict(self, tokens: Tensor, grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """Final-normed tokens (B, K + P + h*w, C) -> mask logits (B, K, h*s, w*s), class logits (B, K, C + 1)."""
        q = tokens[:, :self.num_queries]
        patches = tokens[:, self.num_queries + self.backbone.num_prefix_tokens:]
        patches = patches.transpose(1, 2).reshape(tokens.shape[0], -1, *grid)
        mask_logits = torch.einsum('bqc,bchw->bqhw', self.mask_head(q), self.upscale(patches))
        return mask_logits, self.class_head(q)

    def _attn_mask(self, mask_logits: Tensor, grid: tuple[int, int], num_tokens: int, prob: Tensor | None) -> Tensor:
        """(B, T, T) bool, True = may attend: queries see only their predicted masks, each kept with
        probability ``prob`` (None: all kept)."""
        b, k = mask_logits.shape[:2]
        attn_mask = torch.ones(b, num_tokens, num_tokens, dtype=torch.bool, device=mask_logits.device)
        inside = F.interpolate(mask_logits, grid, mode='bilinear').flatten(2) > 0
        prefix = self.backbone.num_prefix_tokens
        attn_mask[:, :k, k + prefix:] = inside
        if prob is None:
            return attn_mask
        return anneal_attention_mask(attn_mask, prob, k, num_prefix_tokens=prefix)

    def mask_phases(self) -> tuple[str, ...]:
        """Per masked block: ``'keep'`` (probability 1), ``'draw'`` or ``'off'`` (eval at probability 0).

        Read on the host once per forward, so a compiled network re-traces only when a phase changes.
        """
        if not self.masked_attn:
            return ('off', ) * self.num_blocks
        return tuple('keep' if p >= 1.0 else 'draw' if self.training or p > 0.0 else 'off'
                     for p in self.attn_mask_probs.tolist())

    def compile_units(self) -> list:
        """The parts to compile: the prediction network; the loss's Hungarian matching stays eager."""
        return [self.predictions]

    def forward_predictions(self, inputs: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        """(B, 3, H, W) -> per prediction, mask logits (B, K, H/4, W/4) and class logits
        (B, K, C + 1), the masked blocks' first."""
        return self.predictions(inputs, self.mask_phases())

    def predictions(self, inputs: Tensor, phases: tuple[str, ...]) -> tuple[list[Tensor], list[Tensor]]:
        """:meth:`forward_predictions` with the masked blocks' :meth:`mask_phases` given (tensor compute only)."""
        backbone = self.backbone
        x, grid = backbone.embed(inputs)
        position = backbone.position_encoding(grid)
        first = backbone.num_layers - self.num_blocks
        masks, classes = [], []
        for i, blk in enumerate(backbone.blocks):
            if i == first:
                x = torch.cat([self.q.weight[None].expand(x.shape[0], -1, -1), x], dim=1)
            attn_mask = None
            phase = phases[i - first] if i >= first else 'off'
            if phase != 'off':
                mask_logits, class_logits = self._predict(backbone.norm(x), grid)
                masks.append(mask_logits)
                classes.append(class_logits)
                prob = self.attn_mask_probs[i - first] if phase == 'draw' else None
                attn_mask = self._attn_mask(mask_logits, grid, x.shape[1], prob)
            x = blk(x, grid, position, num_queries=self.num_queries if i >= first else 0, attn_mask=attn_mask)
        mask_logits, class_logits = self._predict(backbone.norm(x), grid)
        return masks + [mask_logits], classes + [class_logits]

    def extract_feat(self, inputs: Tensor) -> tuple[list[Tensor], list[Tensor]]:
        return self.forward_predictions(inputs)

    def encode_decode(self, inputs: Tensor, batch_img_metas: list[dict]) -> Tensor:
        """(B, 3, H, W) -> semantic logits (B, C, H, W) of the output prediction."""
        masks, classes = self.forward_predictions(inputs)
        mask_logits = F.interpolate(masks[-1], inputs.shape[-2:], mode='bilinear')
        return torch.einsum('bqhw,bqc->bchw', mask_logits.sigmoid(), classes[-1].softmax(-1)[..., :-1])

    def _forward(self, inputs: Tensor, data_samples=None) -> tuple[list[Tensor], list[Tensor]]:
        return self.forward_predictions(inputs)

    def loss(self, inputs: Tensor, data_samples: list) -> dict[str, Tensor]:
        """The matching loss on every prediction; the intermediate ones' keys end in ``_block_<j>``."""
        if self.mask_annealing is not None and self.annealing_step is None:
            raise RuntimeError('EoMT with mask_annealing needs the training step: add custom_hooks=[dict('
                               'type=\'EoMTMaskAnnealingHook\')] to the config (without it the masks would never be '
                               'annealed away and inference would keep masking)')
        targets = [self._targets(s) for s in data_samples]
        masks, labels = [t[0] for t in targets], [t[1] for t in targets]
        mask_preds, class_preds = self.forward_predictions(inputs)
        losses = {}
        for i, (mask_logits, class_logits) in enumerate(zip(mask_preds, class_preds)):
            suffix = '' if i == len(mask_preds) - 1 else f'_block_{i - len(mask_preds) + 1}'
            for key, value in self.criterion(mask_logits, class_logits, masks, labels).items():
                losses[key + suffix] = value
        return losses

    def _targets(self, sample) -> tuple[Tensor, Tensor]:
        """One data sample's target masks ``(N, H, W)`` bool and classes ``(N,)`` for the task."""
        if self.task == 'semantic':
            return semantic_targets(sample.gt_sem_seg.data[0], self.ignore_index)
        instances = sample.gt_instances
        masks = instances.masks.to_tensor(torch.bool, instances.labels.device)
        seg = sample.gt_sem_seg.sem_seg[0] if self.task == 'panoptic' else None
        return panoptic_targets(masks, instances.labels, seg, self.num_things_classes, self.ignore_index)

    def predict(self, inputs: Tensor, data_samples: list | None = None) -> list:
        """Semantic: mmseg's ``predict``; panoptic/instance: ``pred_panoptic_seg`` or ``pred_instances`` at
        ``ori_shape``."""
        if self.task == 'semantic':
            return super().predict(inputs, data_samples)
        masks, classes = self.forward_predictions(inputs)
        for mask_logits, class_logits, sample in zip(masks[-1], classes[-1], data_samples):
            resize = OriginalSize(inputs.shape[-2:], sample.img_shape, sample.ori_shape)
            if self.task == 'panoptic':
                panoptic = panoptic_segments(mask_logits, class_logits, self.num_things_classes, self.mask_thresh,
                                             self.overlap_thresh, resize=resize)
                sample.pred_panoptic_seg = PixelData(sem_seg=panoptic[None])
            else:
                pred_masks, labels, scores = instance_results(mask_logits, class_logits, self.top_k_instances,
                                                              resize=resize)
                sample.pred_instances = InstanceData(masks=pred_masks, labels=labels, scores=scores,
                                                     bboxes=mask2bbox(pred_masks))
        return data_samples
