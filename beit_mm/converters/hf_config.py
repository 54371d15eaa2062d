"""HF transformers ``config.json`` contents for a built beit_mm model, or :class:`HFIncompatible` listing every part
the HF class cannot represent exactly."""
from __future__ import annotations

from mmpretrain.models.heads import LinearClsHead
from mmseg.models.decode_heads import FCNHead, UPerHead
from mmseg.models.necks import Feature2Pyramid
from torch import nn

from ..models.backbones.beit import BEiT
from ..models.backbones.cvt import PATCH_KERNELS, PATCH_PADDINGS, PATCH_STRIDES, QuickGELU
from ..models.necks.mean_pool import MeanPoolNeck


class HFIncompatible(ValueError):
    """The model has parts the HF class cannot represent; the message lists them."""


def _labels(classes: list[str] | None, num_classes: int) -> dict:
    names = list(classes) if classes else [f'LABEL_{i}' for i in range(num_classes)]
    if len(names) != num_classes:
        names = [f'LABEL_{i}' for i in range(num_classes)]
    return {'id2label': {str(i): n for i, n in enumerate(names)}, 'label2id': {n: i for i, n in enumerate(names)}}


def _layer_norm_eps(backbone: nn.Module, problems: list[str]) -> float | None:
    """The one LayerNorm eps of ``backbone``; with several, a problem is added and None returned."""
    eps = {m.eps for m in backbone.modules() if isinstance(m, nn.LayerNorm)}
    if len(eps) > 1:
        problems.append(f'LayerNorms with different eps {sorted(eps)} (HF has one layer_norm_eps)')
        return None
    return eps.pop()


def beit_hf_config(backbone: nn.Module, use_mean_pooling: bool) -> dict:
    """``BeitConfig`` fields of a ``beit_mm.BEiT``; ``use_mean_pooling`` picks ``fc_norm`` over ``norm``."""
    if not isinstance(backbone, BEiT):
        raise HFIncompatible(f'HF BEiT classes hold a beit_mm.BEiT backbone, not {type(backbone).__name__}')
    problems = []
    block = backbone.blocks[0]
    if backbone.grid[0] != backbone.grid[1]:
        problems.append(f'non-square patch grid {backbone.grid} (HF BEiT takes one image_size)')
    if backbone.num_prefix_tokens > 1 or backbone.no_embed_class:
        problems.append('register tokens or a position embedding without a cls row (HF BEiT has neither; an EoMT '
                        'on this backbone converts to EomtForUniversalSegmentation)')
    if block.attn.q_bias is None:
        problems.append('no q/v bias (HF BEiT always has query/value biases)')
    eps = _layer_norm_eps(backbone, problems)
    if problems:
        raise HFIncompatible('; '.join(problems))
    return dict(
        model_type='beit',
        hidden_size=backbone.embed_dims,
        num_hidden_layers=backbone.num_layers,
        num_attention_heads=backbone.num_heads,
        intermediate_size=block.mlp.fc1.out_features,
        hidden_act='gelu',
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        layer_norm_eps=eps,
        image_size=backbone.grid[0] * backbone.patch_size,
        patch_size=backbone.patch_size,
        num_channels=backbone.patch_embed.proj.in_channels,
        use_mask_token=backbone.mask_token is not None,
        use_absolute_position_embeddings=backbone.pos_embed is not None,
        use_relative_position_bias=block.attn.relative_position_bias_table is not None,
        use_shared_relative_position_bias=backbone.rel_pos_bias is not None,
        # HF creates lambda_1/2 iff this is > 0, as beit_mm creates gamma_1/2
        layer_scale_init_value=backbone.layer_scale_init_value if block.gamma_1 is not None else 0.0,
        drop_path_rate=0.0,
        use_mean_pooling=use_mean_pooling,
    )


def segmentation_hf_config(segmentor: nn.Module, classes: list[str] | None = None) -> dict:
    """``BeitConfig`` fields of an mmseg BEiT + Feature2Pyramid + UPerHead (+ FCNHead) segmentor.

    HF's ``BeitForSemanticSegmentation`` holds levels of blocks ``b <= num_layers - 2``, rescales (4, 2, 1, 0.5),
    ``channels == embed_dims``, ``align_corners=False``, an FCN head on level 2 and square inputs; anything else raises
    :class:`HFIncompatible`.
    """
    backbone = segmentor.backbone
    problems = []
    try:
        cfg = beit_hf_config(backbone, use_mean_pooling=True)
    except HFIncompatible as error:
        problems.append(str(error))
        cfg = {}
    if isinstance(backbone, BEiT):
        if backbone.norm is not None:
            problems.append('final_norm=True (HF segmentation features skip the final norm)')
        blocks = list(backbone.out_indices)
        if len(blocks) != 4 or blocks != sorted(set(blocks)):
            problems.append(f'out_indices {tuple(blocks)}: HF takes 4 increasing levels')
        late = [b for b in blocks if b > backbone.num_layers - 2]
        if late:
            problems.append(f'out_indices {tuple(blocks)} use block(s) {late}; HF BeitForSemanticSegmentation selects '
                            f'hidden_states[o - 1] for o <= num_layers, i.e. blocks <= {backbone.num_layers - 2} '
                            '(the last block cannot be a feature level)')
        cfg['out_indices'] = [b + 2 for b in blocks]
    neck, head, aux = segmentor.neck, segmentor.decode_head, getattr(segmentor, 'auxiliary_head', None)
    # the neck and heads are compared by exact class: HF mirrors these classes' forward, which a subclass may change
    # (mmseg's NLHead, CCHead, DepthwiseSeparableFCNHead, ... are FCNHeads with other modules)
    if type(neck) is not Feature2Pyramid or list(neck.rescales) != [4, 2, 1, 0.5]:
        problems.append(f'neck {type(neck).__name__} (HF: Feature2Pyramid with rescales [4, 2, 1, 0.5])')
    if type(head) is not UPerHead:
        problems.append(f'decode head {type(head).__name__} (HF: UPerHead)')
    else:
        width = getattr(backbone, 'embed_dims', None)
        if head.channels != width or list(head.in_channels) != [width] * 4 or list(head.in_index) != [0, 1, 2, 3]:
            problems.append(f'UPerHead channels {head.channels}, in_channels {head.in_channels}, in_index '
                            f'{head.in_index} (HF: channels = in_channels = embed_dims {width}, in_index 0-3)')
        if head.align_corners:
            problems.append('UPerHead align_corners=True (HF: False)')
        cfg['pool_scales'] = list(head.psp_modules.pool_scales)
    bn_eps = {m.eps for m in segmentor.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)}
    if bn_eps - {1e-5}:
        problems.append(f'BatchNorm eps {sorted(bn_eps)} (HF: 1e-5)')
    cfg['use_auxiliary_head'] = aux is not None
    if aux is not None:
        convs = [m for m in aux.modules() if isinstance(m, nn.Conv2d) and m is not aux.conv_seg]
        if (type(aux) is not FCNHead or aux.in_index != 2
                or any(c.kernel_size != (3, 3) or c.dilation != (1, 1) or c.padding != (1, 1) for c in convs)):
            problems.append(f'auxiliary head {type(aux).__name__} (HF: FCNHead on level 2, 3x3 convs, dilation 1)')
        else:
            cfg.update(auxiliary_channels=aux.channels, auxiliary_num_convs=aux.num_convs,
                       auxiliary_concat_input=aux.concat_input,
                       auxiliary_loss_weight=float(getattr(aux.loss_decode, 'loss_weight', 0.4)))
            if aux.num_classes != head.num_classes:
                problems.append('auxiliary head with another number of classes')
    if problems:
        raise HFIncompatible('HF BeitForSemanticSegmentation cannot hold this segmentor exactly: ' + '; '.join(problems))
    cfg.update(architectures=['BeitForSemanticSegmentation'], semantic_loss_ignore_index=255,
               **_labels(classes, head.num_classes))
    return cfg


def classification_hf_config(classifier: nn.Module, classes: list[str] | None = None) -> dict:
    """``BeitConfig`` of an mmpretrain BEiT + ``MeanPoolNeck`` + ``LinearClsHead`` classifier."""
    neck, head = classifier.neck, classifier.head
    if type(neck) is not MeanPoolNeck or type(head) is not LinearClsHead:
        raise HFIncompatible(f'HF BeitForImageClassification holds BEiT + MeanPoolNeck + LinearClsHead, not '
                             f'{type(neck).__name__} + {type(head).__name__}')
    if classifier.backbone.norm is not None:
        raise HFIncompatible('a classifier backbone with final_norm=True (HF mean pooling has no final norm)')
    cfg = beit_hf_config(classifier.backbone, use_mean_pooling=True)
    cfg.update(architectures=['BeitForImageClassification'], **_labels(classes, head.num_classes))
    return cfg


def cvt_hf_config(backbone: nn.Module, num_classes: int | None = None, classes: list[str] | None = None) -> dict:
    """``CvtConfig`` of a ``beit_mm.CvT`` (``num_classes``: a ``CvtForImageClassification``, else ``CvtModel``)."""
    problems = []
    if any(isinstance(m, QuickGELU) for m in backbone.modules()):
        problems.append("act='quick_gelu' (HF CvT runs exact GELU; only act='gelu' models give identical outputs)")
    if backbone.stage0.mask_token is not None:
        problems.append('a MIM mask token (HF CvT has none)')
    short = [s for s, d in enumerate(backbone.depths) if d <= s]
    if short:  # transformers 4.46 modeling_cvt.py CvtStage: drop_path_rate=drop_path_rates[self.stage]
        problems.append(f'depths {backbone.depths}: HF CvtStage indexes its per-block drop-path list by the stage '
                        f'index, which fails (IndexError) for stage(s) {short} with depth <= stage index')
    if num_classes is None and backbone.norm is not None:
        problems.append('final_norm=True without a classifier (HF CvtModel has no final norm)')
    if problems:
        raise HFIncompatible('HF CvT cannot hold this model exactly: ' + '; '.join(problems))
    cfg = dict(model_type='cvt', num_channels=backbone.stage0.patch_embed.proj.in_channels,
               patch_sizes=list(PATCH_KERNELS), patch_stride=list(PATCH_STRIDES), patch_padding=list(PATCH_PADDINGS),
               embed_dim=list(backbone.embed_dims), depth=list(backbone.depths),
               num_heads=[getattr(backbone, f'stage{s}').blocks[0].attn.num_heads for s in range(3)],
               mlp_ratio=[4.0] * 3, drop_path_rate=[0.0] * 3, cls_token=[False, False, True])
    if num_classes is not None:
        cfg.update(architectures=['CvtForImageClassification'], **_labels(classes, num_classes))
    else:
        cfg.update(architectures=['CvtModel'])
    return cfg


def eomt_hf_config(segmentor: nn.Module, classes: list[str] | None = None) -> dict:
    """``EomtConfig`` fields of a ``beit_mm.EoMT``, or :class:`HFIncompatible` listing what HF's DINOv2-style
    EoMT cannot hold (relative bias, other position embeddings, a non-square grid, unmasked attention, mixed eps)."""
    backbone, block = segmentor.backbone, segmentor.backbone.blocks[0]
    problems = []
    if block.attn.relative_position_bias_table is not None or backbone.rel_pos_bias is not None:
        problems.append('relative position bias (HF EoMT has absolute position embeddings only)')
    if backbone.pos_embed is None or not backbone.no_embed_class:
        problems.append('a position embedding with a cls row or none (HF EoMT: patch positions only; build the '
                        'BEiT with use_abs_pos_emb=True, no_embed_class=True)')
    if backbone.grid[0] != backbone.grid[1]:
        problems.append(f'non-square patch grid {backbone.grid} (HF EoMT takes one image_size)')
    if block.mlp.fc1.out_features % backbone.embed_dims:
        problems.append(f'MLP width {block.mlp.fc1.out_features} is no integer multiple of {backbone.embed_dims} (HF '
                        'EoMT takes an integer mlp_ratio)')
    if not segmentor.masked_attn:
        problems.append('masked_attn=False (HF EoMT always masks the last num_blocks blocks while training)')
    eps = _layer_norm_eps(backbone, problems)
    if problems:
        raise HFIncompatible('; '.join(problems))
    loss = segmentor.criterion
    return dict(
        model_type='eomt',
        architectures=['EomtForUniversalSegmentation'],
        hidden_size=backbone.embed_dims,
        num_hidden_layers=backbone.num_layers,
        num_attention_heads=backbone.num_heads,
        mlp_ratio=block.mlp.fc1.out_features // backbone.embed_dims,
        hidden_act='gelu',
        layer_norm_eps=eps,
        image_size=backbone.grid[0] * backbone.patch_size,
        patch_size=backbone.patch_size,
        num_channels=backbone.patch_embed.proj.in_channels,
        num_upscale_blocks=len(segmentor.upscale),
        num_blocks=segmentor.num_blocks,
        num_queries=segmentor.num_queries,
        num_register_tokens=backbone.num_prefix_tokens - 1,
        class_weight=loss.class_weight,
        mask_weight=loss.mask_weight,
        dice_weight=loss.dice_weight,
        no_object_weight=float(loss.class_weights[-1]),
        train_num_points=loss.num_points,
        oversample_ratio=loss.oversample_ratio,
        importance_sample_ratio=loss.importance_sample_ratio,
        **_labels(classes, segmentor.num_classes),
    )
