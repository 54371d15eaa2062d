# Demo: a tiny BEiT (4 blocks, 96 wide, 8x8-pixel patches) + UPerNet trained FROM SCRATCH (no pretrained checkpoint,
# on purpose) on the generated ADE20K-layout demo data (python tools/make_demo_data.py), 1 process x 8 images,
# 1k iterations, 64x64 crops. Runs on 2 CPU cores in minutes: bash tools/run_demo.sh
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_demo_64x64.py', '../_base_/default_runtime.py',
    '../_base_/schedules/demo_adamw-layer-decay_1k.py'
]
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
embed_dims = 96
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=64,
        patch_size=8,
        drop_path_rate=0.0,
        out_indices=(0, 1, 2, 3)),
    neck=dict(embed_dim=embed_dims, norm_cfg=norm_cfg),
    decode_head=dict(in_channels=[embed_dims] * 4, channels=32, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=embed_dims, channels=16, norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
