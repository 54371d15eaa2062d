# Demo: Mask2Former on ViT-Adapter (beit_mm.BEiTAdapter) over a tiny BEiT (4 blocks, 96 wide, 16x16-pixel patches),
# trained FROM SCRATCH on the generated ADE20K-layout demo data (python tools/make_demo_data.py), 1 process x
# 8 images, 1k iterations, 64x64 crops: the Mask2Former demo's head, loss, data, optimizer and schedule
# (configs/demo/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py) with the adapter's 4 levels (strides
# 4/8/16/32) in place of the pyramid neck, the backbone of the ViT-Adapter UPerNet demo
# (beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py).
_base_ = ['./mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py']
norm_cfg = dict(type='BN', requires_grad=True)
embed_dims = 96
model = dict(
    data_preprocessor=dict(test_cfg=dict(_delete_=True, size_divisor=32)),  # the adapter needs multiples of 32
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch=dict(embed_dims=embed_dims, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size=64,
        patch_size=16,
        layer_scale_init_value=0.1,
        drop_path_rate=0.0,
        conv_inplane=16,
        n_points=4,
        deform_num_heads=3,
        cffn_ratio=0.25,
        deform_ratio=1.0,
        interaction_indexes=[[0, 0], [1, 1], [2, 2], [3, 3]],
        norm_cfg=norm_cfg),
    neck=None)
