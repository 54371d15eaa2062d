# Demo: Mask2Former panoptic segmentation (mmdet 3.3.0) on the EoMT panoptic demo's tiny BEiT, data and schedule,
# trained from scratch on the generated COCO-layout demo (python tools/make_demo_data.py --layout coco), 1 process x 8
# images, 300 iterations; the head narrowed to 64 channels and 196 sampled points as the semantic Mask2Former demo.
_base_ = [
    '../_base_/models/mask2former_beit_coco-panoptic.py', '../_base_/default_runtime.py',
    '../_base_/schedules/demo_adamw-layer-decay_1k.py', '../_base_/datasets/coco-panoptic_demo-64x64.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
img_size = 64
embed_dims = 96
head_dims = 64
thing_classes = ('person', 'car')
stuff_classes = ('road', 'sky-other-merged', 'grass-merged')
num_things_classes = len(thing_classes)
num_stuff_classes = len(stuff_classes)
num_classes = num_things_classes + num_stuff_classes
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(pad_size_divisor=img_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=img_size,
        patch_size=8,
        drop_path_rate=0.0,
        out_indices=(0, 1, 2, 3)),
    neck=dict(embed_dim=embed_dims, norm_cfg=norm_cfg),
    panoptic_head=dict(
        in_channels=[embed_dims] * 4,
        feat_channels=head_dims,
        out_channels=head_dims,
        num_things_classes=num_things_classes,
        num_stuff_classes=num_stuff_classes,
        pixel_decoder=dict(
            encoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=head_dims, num_heads=4),
                                        ffn_cfg=dict(embed_dims=head_dims, feedforward_channels=4 * head_dims))),
            positional_encoding=dict(num_feats=head_dims // 2)),
        positional_encoding=dict(num_feats=head_dims // 2),
        transformer_decoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=head_dims, num_heads=4),
                                                cross_attn_cfg=dict(embed_dims=head_dims, num_heads=4),
                                                ffn_cfg=dict(embed_dims=head_dims,
                                                             feedforward_channels=4 * head_dims))),
        loss_cls=dict(class_weight=[1.0] * num_classes + [0.1])),
    panoptic_fusion_head=dict(num_things_classes=num_things_classes, num_stuff_classes=num_stuff_classes),
    train_cfg=dict(num_points=196),
    test_cfg=dict(panoptic_on=True, instance_on=False))
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
]
visualizer = dict(_delete_=True, type='beit_mm.PanopticDetLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')])
tta_model = None
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
