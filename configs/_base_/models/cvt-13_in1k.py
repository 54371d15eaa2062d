# CvT-13 ImageNet classifier (mmpretrain ImageClassifier): backbone returns norm(cls_token) (B, 384) -> LinearClsHead
# with label smoothing 0.1; mixup 0.8 / cutmix 1.0, one of them per batch (timm's switch prob 0.5). The data
# preprocessor (mean/std, num_classes for the batch augments) comes from the dataset base (top-level
# `data_preprocessor`).
model = dict(
    type='ImageClassifier',
    backbone=dict(type='beit_mm.CvT', arch='cvt-13', drop_path_rate=(0.0, 0.0, 0.1), out_type='cls_token'),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=384,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=0.02, bias=0.0),
        cal_acc=False),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))
