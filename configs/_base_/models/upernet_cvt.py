# UPerNet on CvT-13 (hierarchical, like Swin: no pyramid neck). CvT returns 4 levels: the three stage maps (strides 4,
# 8, 16; 64/192/384 channels, the stage-2 map through the final LayerNorm) and the stage-2 map max-pooled to stride 32
# (384 channels) -> UPerHead (512 channels, as mmseg's Swin UPerNet); FCN auxiliary head on level 2 with weight 0.4.
# The cls token of stage 2 takes part in attention but is not returned. Inputs normalized with ImageNet mean/std
# (CvT's INPUT.MEAN/STD).
norm_cfg = dict(type='SyncBN', requires_grad=True)
data_preprocessor = dict(
    type='beit_mm.PhotoMetricSegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='beit_mm.CvT',
        arch='cvt-13',
        drop_path_rate=(0.0, 0.0, 0.1),
        out_type='featmap',
        out_indices=(0, 1, 2, 3),
        final_norm=True,
        with_cp=False),
    decode_head=dict(
        type='UPerHead',
        in_channels=[64, 192, 384, 384],
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=512,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=dict(
        type='FCNHead',
        in_channels=384,
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
