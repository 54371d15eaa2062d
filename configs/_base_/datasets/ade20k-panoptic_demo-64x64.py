# The generated ADE20K panoptic demo (python tools/make_demo_data.py --layout ade20k-panoptic -> data/ade_panoptic_demo:
# things person, car; stuff road, sky, grass) at 64x64: ade20k-panoptic.py's datasets with the COCO panoptic demo's
# pipelines (images resized to fit 64x64 keeping their aspect, flipped; the model's data preprocessor pads them). As
# variables: the EoMT and Mask2Former ADE20K panoptic demos inherit their COCO panoptic demos (model, schedule,
# dataloaders) and replace the datasets, `dataset=dict(_delete_=True, **_base_.ade20k_panoptic_demo_train)`.
_base_ = ['./ade20k-panoptic.py']
ade20k_panoptic_demo_train = dict(
    **_base_.ade20k_panoptic_train,
    data_root='data/ade_panoptic_demo/',
    pipeline=[
        dict(type='mmdet.LoadImageFromFile'),
        dict(type='beit_mm.LoadADE20KPanopticAnnotations'),
        dict(type='mmdet.RandomFlip', prob=0.5),
        dict(type='mmdet.Resize', scale=(64, 64), keep_ratio=True),
        dict(type='mmdet.PackDetInputs'),
    ])
ade20k_panoptic_demo_val = dict(
    **_base_.ade20k_panoptic_val,
    data_root='data/ade_panoptic_demo/',
    pipeline=[
        dict(type='mmdet.LoadImageFromFile'),
        dict(type='mmdet.Resize', scale=(64, 64), keep_ratio=True),
        dict(type='mmdet.PackDetInputs', meta_keys=_base_.ade20k_panoptic_meta_keys),
    ])
