# Demo: ViT-Adapter (beit_mm.BEiTAdapter) on a tiny BEiT (4 blocks, 96 wide, 16x16-pixel patches: the adapter's
# prior levels are strides 8/16/32 around a stride-16 ViT) + UPerNet, trained FROM SCRATCH on the generated
# ADE20K-layout demo data (python tools/make_demo_data.py), 1 process x 8 images, 1k iterations, 64x64 crops: the
# UPerNet demo's data, optimizer and schedule (configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py), with
# the adapter's 4 levels (strides 4/8/16/32) in place of the pyramid neck. One interaction block per ViT block; the
# spatial prior's first stage 16 wide (official 64).
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_demo_64x64.py', '../_base_/default_runtime.py',
    '../_base_/schedules/demo_adamw-layer-decay_1k.py', '../_base_/models/beit-adapter-tiny_demo.py'
]
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
embed_dims = 96
model = dict(
    data_preprocessor=dict(size=crop_size, test_cfg=dict(size_divisor=32)),
    backbone=dict(_delete_=True, **_base_.beit_adapter_tiny),
    neck=None,
    decode_head=dict(in_channels=[embed_dims] * 4, channels=32, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=embed_dims, channels=16, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
