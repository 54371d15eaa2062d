# The DINOv3 ViT-L/16 backbone (LVD-1689M: 4 storage tokens, 2-D RoPE, no absolute position embedding) of the official
# EoMT DINOv3 configs (configs/eomt/eomt_dinov3-large-*.py): layer scale, the final norm EoMT predicts from, no drop
# path. A variable, not a model: those configs inherit the official DINOv2 config of their task and replace its
# backbone, `backbone=dict(_delete_=True, **_base_.eomt_dinov3_large, img_size=..., init_cfg=...)`.
eomt_dinov3_large = dict(
    type='beit_mm.DINOv3',
    arch='large',
    patch_size=16,
    num_register_tokens=4,
    layer_scale_init_value=1e-5,
    rope_rescale_coords=2.0,
    drop_path_rate=0.0,
    final_norm=True)
