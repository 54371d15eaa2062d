# The 64 px demos' tiny ViT-Adapter (beit_mm.BEiTAdapter over a BEiT of 4 blocks, 96 wide, 16x16-pixel patches: the
# adapter's prior levels are strides 8/16/32 around a stride-16 ViT; out: 4 levels of 96 channels at strides 4/8/16/32,
# so inputs are multiples of 32), one interaction block per ViT block, the spatial prior's first stage 16 wide (official
# 64). A variable, not a model: the demos on other heads (configs/demo/*beit-adapter-tiny*) put it in place of their
# backbone, `backbone=dict(_delete_=True, **_base_.beit_adapter_tiny)` with `neck=None`.
beit_adapter_tiny = dict(
    type='beit_mm.BEiTAdapter',
    arch=dict(embed_dims=96, num_layers=4, num_heads=3, mlp_ratio=4.0),
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
    norm_cfg=dict(type='BN', requires_grad=True))
