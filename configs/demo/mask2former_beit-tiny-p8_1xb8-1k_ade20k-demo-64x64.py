# Demo: Mask2Former (mmseg 1.2.2's Mask2FormerHead) on a tiny BEiT trained from scratch on the generated ADE20K-layout
# demo data, 1 process x 8 images, 1k iterations, 64x64 crops: the UPerNet demo's backbone, neck, data, optimizer and
# schedule; the full-size head structure and loss narrowed to 64 channels, 196 sampled points (12544 at 512 scaled).
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
