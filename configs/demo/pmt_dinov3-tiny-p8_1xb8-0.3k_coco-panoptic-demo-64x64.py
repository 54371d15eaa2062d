# Demo: PMT (beit_mm.PMT) on the generated COCO-layout panoptic demo (python tools/make_demo_data.py --layout coco):
# eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py's data, queries and budget (1 process x 8 images, 300
# iterations) with a tiny DINOv3 (4 blocks, 96 wide, 3 heads, 4 storage tokens, RoPE, 8x8 patches) kept FROZEN at its
# random init, read at every block by PMT's decoder (6 blocks, MLP ratio 1, layer scale 1). PMT's optimizer (AdamW,
# no layer decay, clip 0.01) at the demos' lr 2e-3 and its schedule's shape (linear warm-up, then cosine to 1e-9);
# the annealing steps are the COCO recipe's scaled to 300 iterations. BN1d in the neck: one process, no SyncBN.
_base_ = ['./eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py']
model = dict(
    type='beit_mm.PMT',
    backbone=dict(
        _delete_=True,
        type='beit_mm.DINOv3',
        arch=dict(embed_dims={{_base_.embed_dims}}, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=64,
        patch_size=8,
        num_register_tokens=4,
        layer_scale_init_value=0.1,
        rope_rescale_coords=2.0,
        drop_path_rate=0.0,
        final_norm=True),
    feature_indices=(0, 1, 2, 3),
    num_blocks=6,
    mlp_ratio=1.0,
    layer_scale_init_value=1.0,
    norm_cfg=dict(type='BN1d'),
    mask_annealing=dict(start_steps=[0, 80, 110, 140, 170, 200], end_steps=[10, 130, 160, 190, 220, 250],
                        poly_power=0.9))
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-9, by_epoch=False, begin=0, end=21),
    dict(type='CosineAnnealingLR', eta_min=1e-9, by_epoch=False, begin=20, end={{_base_.max_iters}}),
]
