# Demo: Mask2Former (mmseg 1.2.2's Mask2FormerHead on mmdet 3.3.0) on a tiny BEiT (4 blocks, 96 wide, 8x8-pixel
# patches) trained FROM SCRATCH on the generated ADE20K-layout demo data (python tools/make_demo_data.py), 1 process x
# 8 images, 1k iterations, 64x64 crops: the UPerNet demo's backbone, neck, data, optimizer and schedule
# (configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py), so the heads compare at the same budget.
# Mask2Former's own structure and loss are the full-size ones (configs/_base_/models/mask2former_beit.py: 100 queries,
# 6 deformable encoder layers over 3 levels, 9 decoder layers, loss 2/5/5 with no-object 0.1), with the head narrowed
# from 256 to 64 channels in 4 heads (feed-forward 4x) as the UPerNet demo narrows UPerHead, and the loss's sampled
# points scaled with the mask logits (stride 4): 12544 points on the 128x128 logits of a 512 crop (0.77 per logit
# pixel) -> 196 on the demo's 16x16. At 12544 points one step of this demo took 40 s on 2 loaded cores (1.7 s at 256):
# the point loss and matching of 10 predictions (9 decoder layers and the initial queries) x 8 images dominate.
_base_ = [
    '../_base_/models/mask2former_beit.py', '../_base_/datasets/ade20k_demo_64x64.py', '../_base_/default_runtime.py',
    '../_base_/schedules/demo_adamw-layer-decay_1k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)
embed_dims = 96
head_dims = 64
model = dict(
    data_preprocessor=dict(size=crop_size, test_cfg=None),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=64,
        patch_size=8,
        drop_path_rate=0.0,
        out_indices=(0, 1, 2, 3)),
    neck=dict(embed_dim=embed_dims, norm_cfg=norm_cfg),
    decode_head=dict(
        in_channels=[embed_dims] * 4,
        feat_channels=head_dims,
        out_channels=head_dims,
        pixel_decoder=dict(
            encoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=head_dims, num_heads=4),
                                        ffn_cfg=dict(embed_dims=head_dims, feedforward_channels=4 * head_dims))),
            positional_encoding=dict(num_feats=head_dims // 2)),
        positional_encoding=dict(num_feats=head_dims // 2),
        transformer_decoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=head_dims, num_heads=4),
                                                cross_attn_cfg=dict(embed_dims=head_dims, num_heads=4),
                                                ffn_cfg=dict(embed_dims=head_dims,
                                                             feedforward_channels=4 * head_dims))),
        train_cfg=dict(num_points=196)),
    test_cfg=dict(mode='whole'))
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0, deterministic=True)
