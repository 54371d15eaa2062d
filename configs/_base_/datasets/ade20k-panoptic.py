# ADE20K panoptic as beit_mm.ADE20KPanopticDataset reads it (the official EoMT's reading: images/, annotations/ and
# annotations_instance/, each with training/ and validation/; mmdet's ADE20K panoptic classes, things first), and the
# meta keys PanopticQualityMetric needs from the test pipeline's PackDetInputs. Variables, not dataloaders: the
# configs that use it inherit a model config that has its own (MMEngine refuses one key in two bases), so they write
# `dataset=dict(_delete_=True, **_base_.ade20k_panoptic_train, data_root=..., pipeline=...)`.
ade20k_panoptic_train = dict(
    type='beit_mm.ADE20KPanopticDataset',
    data_prefix=dict(img='images/training/', seg='annotations/training/', instance='annotations_instance/training/'))
ade20k_panoptic_val = dict(
    type='beit_mm.ADE20KPanopticDataset',
    data_prefix=dict(img='images/validation/', seg='annotations/validation/',
                     instance='annotations_instance/validation/'),
    test_mode=True)
ade20k_panoptic_meta_keys = ('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor', 'seg_map_path',
                             'instance_map_path')
