# Demo: EoMT panoptic segmentation (beit_mm.EoMT, task='panoptic') on a tiny BEiT trained from scratch on the generated
# COCO-layout demo (python tools/make_demo_data.py --layout coco), 1 process x 8 images, 300 iterations, images fitted
# into 64x64 and padded as the official EoMT feeds COCO; the EoMT demo's optimizer and annealing at 300 iterations.
_base_ = [
    '../_base_/models/eomt_beit.py', '../_base_/default_runtime.py', '../_base_/schedules/demo_adamw-layer-decay_1k.py',
    '../_base_/datasets/coco-panoptic_demo-64x64.py'
]
img_size = 64
embed_dims = 96
thing_classes = ('person', 'car')
stuff_classes = ('road', 'sky-other-merged', 'grass-merged')
model = dict(
    data_preprocessor=dict(
        type='mmdet.DetDataPreprocessor',
        mean=[127.5, 127.5, 127.5],
        std=[127.5, 127.5, 127.5],
        bgr_to_rgb=True,
        pad_size_divisor=img_size,
        pad_mask=True,
        mask_pad_value=0,
        pad_seg=True,
        seg_pad_value=255),
    backbone=dict(
        arch=dict(embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0), img_size=img_size, patch_size=8),
    task='panoptic',
    num_classes=len(thing_classes) + len(stuff_classes),
    num_things_classes=len(thing_classes),
    num_queries=20,
    num_blocks=2,
    mask_annealing=dict(start_steps=[83, 166], end_steps=[166, 249], poly_power=0.9))
max_iters = 300
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=20, end=max_iters),
]
default_hooks = dict(checkpoint=dict(interval=max_iters),
                     visualization=dict(type='mmdet.DetVisualizationHook'))
custom_hooks = [
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),
]
visualizer = dict(type='beit_mm.PanopticDetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')],
                  name='visualizer')
tta_model = None
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
