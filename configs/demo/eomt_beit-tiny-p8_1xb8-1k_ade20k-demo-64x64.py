# Demo: EoMT (Kerssies et al. CVPR 2025) on a tiny BEiT trained from scratch on the generated ADE20K-layout demo data, 1
# process x 8 images, 1k iterations, 64x64 crops: the UPerNet demo's backbone, data, optimizer and schedule, so the two
# heads compare at the same budget. EoMT's values of tue-mps/eomt@7bd19dd configs/dinov2/ade20k/semantic/
# eomt_large_512.yaml, its annealing scaled to 1k iterations and L2 = 2 of 4 blocks (U = 277).
_base_ = [
    '../_base_/models/eomt_beit.py', '../_base_/datasets/ade20k_demo_64x64.py', '../_base_/default_runtime.py',
    '../_base_/schedules/demo_adamw-layer-decay_1k.py'
]
crop_size = (64, 64)
embed_dims = 96
model = dict(
    data_preprocessor=dict(
        type='beit_mm.PhotoMetricSegDataPreProcessor',
        mean=[127.5, 127.5, 127.5],
        std=[127.5, 127.5, 127.5],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=255,
        size=crop_size),
    backbone=dict(
        arch=dict(embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0), img_size=64, patch_size=8),
    num_blocks=2,
    mask_annealing=dict(start_steps=[277, 554], end_steps=[554, 831], poly_power=0.9),
    test_cfg=dict(mode='whole'))
custom_hooks = [
    dict(type='beit_mm.SegDatasetCheckHook', num_samples=200),
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),
]
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
