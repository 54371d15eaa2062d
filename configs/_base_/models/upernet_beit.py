# UPerNet on a plain BEiT (unilm semantic_segmentation / mmseg upernet_beit): blocks (3, 5, 7, 11) -> 4-level pyramid
# (4x ConvT-BN-GELU-ConvT, 2x ConvT, 1x, 0.5x max-pool) -> UPerHead; FCN auxiliary head on level 2 with weight 0.4.
norm_cfg = dict(type='SyncBN', requires_grad=True)
data_preprocessor = dict(
    type='beit_mm.PhotoMetricSegDataPreProcessor',
    mean=[127.5, 127.5, 127.5],
    std=[127.5, 127.5, 127.5],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    test_cfg=dict(size_divisor=16))
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='beit_mm.BEiT',
        arch='base',
        img_size=640,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        use_shared_rel_pos_bias=False,
        layer_scale_init_value=0.1,
        drop_path_rate=0.1,
        out_indices=(3, 5, 7, 11),
        final_norm=False,
        with_cp=False),
    neck=dict(type='Feature2Pyramid', embed_dim=768, rescales=[4, 2, 1, 0.5], norm_cfg=norm_cfg),
    decode_head=dict(
        type='UPerHead',
        in_channels=[768, 768, 768, 768],
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=768,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=dict(
        type='FCNHead',
        in_channels=768,
        in_index=2,
        channels=256,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
