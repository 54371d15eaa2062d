# Mask2Former (Cheng et al. CVPR 2022, arXiv 2112.01527) on a plain BEiT, through mmseg 1.2.2's real EncoderDecoder and
# Mask2FormerHead (which wraps mmdet 3.3.0's: MSDeformAttnPixelDecoder, 9 masked-attention decoder layers, Hungarian
# matching). The backbone is fed to the head as UPerNet's BEiT configs feed UPerHead (upernet_beit.py): blocks
# (3, 5, 7, 11) -> Feature2Pyramid (4x ConvT-BN-GELU-ConvT, 2x ConvT, 1x, 0.5x max-pool) -> 4 levels at strides
# 4, 8, 16, 32; the pixel decoder's deformable encoder reads the last 3, the mask features come from the first.
# (ViT-Adapter's Mask2Former BEiT configs make the 4 levels with its adapter: configs/vit_adapter/.)
# Sources (path:line), the same values in both:
# - M = open-mmlab/mmsegmentation v1.2.2 configs/mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py (as shipped
#   in the mmsegmentation 1.2.2 wheel, mmseg/.mim/configs): the mmseg 1.x / mmdet 3.x field names;
# - C = czczup/ViT-Adapter@fd64a51 segmentation/configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_
#   cocostuff10k_ss.py, ViT-Adapter's BEiT-B Mask2Former (its ADE20K configs are BEiT-L only).
# Configs set the backbone's size and init, the data preprocessor, num_classes (and the loss's class_weight, one
# per class plus the no-object weight) and test_cfg, and add 'mmdet.models' to custom_imports (M:3).
norm_cfg = dict(type='SyncBN', requires_grad=True)  # tools/train.py uses BN when the run is not distributed
num_classes = 150
data_preprocessor = dict(
    type='beit_mm.PhotoMetricSegDataPreProcessor',  # mmseg's, + the distortion a train pipeline leaves to it
    mean=[127.5, 127.5, 127.5],  # BEiT normalizes to [-1, 1]
    std=[127.5, 127.5, 127.5],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    test_cfg=dict(size_divisor=32))  # M:14
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='beit_mm.BEiT',
        arch='base',
        img_size=640,
        patch_size=16,
        use_abs_pos_emb=False,  # C:22
        use_rel_pos_bias=True,  # C:23
        use_shared_rel_pos_bias=False,
        layer_scale_init_value=0.1,
        drop_path_rate=0.1,
        out_indices=(3, 5, 7, 11),
        final_norm=False,
        with_cp=False),
    neck=dict(type='Feature2Pyramid', embed_dim=768, rescales=[4, 2, 1, 0.5], norm_cfg=norm_cfg),
    decode_head=dict(
        type='Mask2FormerHead',
        in_channels=[768, 768, 768, 768],  # C:34 (the 4 levels' widths)
        strides=[4, 8, 16, 32],  # M:32
        feat_channels=256,  # M:33, C:35
        out_channels=256,  # M:34, C:36
        num_classes=num_classes,
        num_queries=100,  # M:36, C:37
        num_transformer_feat_level=3,  # M:37
        align_corners=False,
        pixel_decoder=dict(
            type='mmdet.MSDeformAttnPixelDecoder',
            num_outs=3,  # M:41, C:40
            norm_cfg=dict(type='GN', num_groups=32),  # M:42, C:41
            act_cfg=dict(type='ReLU'),  # M:43, C:42
            encoder=dict(  # DeformableDetrTransformerEncoder
                num_layers=6,  # M:45, C:45
                layer_cfg=dict(  # DeformableDetrTransformerEncoderLayer
                    self_attn_cfg=dict(  # MultiScaleDeformableAttention
                        embed_dims=256,  # M:48, C:50
                        num_heads=8,  # M:49, C:51
                        num_levels=3,  # M:50, C:52
                        num_points=4,  # M:51, C:53
                        im2col_step=64,  # M:52, C:54
                        dropout=0.0,  # M:53, C:55
                        batch_first=True,  # M:54 (mmdet 3.x layout)
                        norm_cfg=None,
                        init_cfg=None),
                    ffn_cfg=dict(
                        embed_dims=256,  # M:58, C:61
                        feedforward_channels=1024,  # M:59, C:62
                        num_fcs=2,  # M:60, C:63
                        ffn_drop=0.0,  # M:61, C:64
                        act_cfg=dict(type='ReLU', inplace=True))),  # M:62, C:65
                init_cfg=None),
            positional_encoding=dict(num_feats=128, normalize=True),  # SinePositionalEncoding, M:64-65, C:68-69
            init_cfg=None),
        enforce_decoder_input_project=False,  # M:67
        positional_encoding=dict(num_feats=128, normalize=True),  # M:68-69, C:71-72
        transformer_decoder=dict(  # Mask2FormerTransformerDecoder
            return_intermediate=True,  # M:71, C:75
            num_layers=9,  # M:72, C:76
            layer_cfg=dict(  # Mask2FormerTransformerDecoderLayer (cross-attention, self-attention, FFN: C:96-97)
                self_attn_cfg=dict(  # MultiheadAttention
                    embed_dims=256,  # M:75, C:81
                    num_heads=8,  # M:76, C:82
                    attn_drop=0.0,
                    proj_drop=0.0,
                    dropout_layer=None,
                    batch_first=True),
                cross_attn_cfg=dict(  # MultiheadAttention
                    embed_dims=256,  # M:82
                    num_heads=8,  # M:83
                    attn_drop=0.0,
                    proj_drop=0.0,
                    dropout_layer=None,
                    batch_first=True),
                ffn_cfg=dict(
                    embed_dims=256,  # M:89, C:88
                    feedforward_channels=2048,  # M:90, C:89
                    num_fcs=2,
                    act_cfg=dict(type='ReLU', inplace=True),
                    ffn_drop=0.0,
                    dropout_layer=None,
                    add_identity=True)),
            init_cfg=None),
        loss_cls=dict(
            type='mmdet.CrossEntropyLoss',
            use_sigmoid=False,
            loss_weight=2.0,  # M:100; ViT-Adapter _base_/models/mask2former_beit.py:96
            reduction='mean',
            class_weight=[1.0] * num_classes + [0.1]),  # no-object weight 0.1: M:102; mask2former_beit.py:98
        loss_mask=dict(
            type='mmdet.CrossEntropyLoss',
            use_sigmoid=True,
            reduction='mean',
            loss_weight=5.0),  # M:107; mask2former_beit.py:103
        loss_dice=dict(
            type='mmdet.DiceLoss',
            use_sigmoid=True,
            activate=True,
            reduction='mean',
            naive_dice=True,
            eps=1.0,
            loss_weight=5.0),  # M:115; mask2former_beit.py:111
        train_cfg=dict(
            num_points=12544,  # M:117; mask2former_beit.py:113
            oversample_ratio=3.0,  # M:118; mask2former_beit.py:114
            importance_sample_ratio=0.75,  # M:119; mask2former_beit.py:115
            assigner=dict(
                type='mmdet.HungarianAssigner',
                match_costs=[
                    dict(type='mmdet.ClassificationCost', weight=2.0),  # M:123; mask2former_beit.py:118
                    dict(type='mmdet.CrossEntropyLossCost', weight=5.0, use_sigmoid=True),  # M:124-127; :119-120
                    dict(type='mmdet.DiceCost', weight=5.0, pred_act=True, eps=1.0)  # M:128-132; :121-122
                ]),
            sampler=dict(type='mmdet.MaskPseudoSampler'))),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
