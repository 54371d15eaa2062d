# The BEiT-L backbone of the EoMT configs at 640 px (configs/eomt/eomt_beit*-large_*_coco-*-640x640.py): unilm's BEiT-L
# (24 blocks, 1024 wide, 16 heads, patch 16) with a relative position bias per block, no absolute position embedding,
# layer scale and the final norm EoMT predicts from, without drop path (EoMT runs the blocks without it). A variable,
# not a model: those configs inherit the official DINOv2 config of their task and replace its backbone,
# `backbone=dict(_delete_=True, **_base_.eomt_beit_large, init_cfg=dict(type='Pretrained', checkpoint=pretrained))`.
eomt_beit_large = dict(
    type='beit_mm.BEiT',
    arch='large',
    img_size=640,
    patch_size=16,
    use_abs_pos_emb=False,
    use_rel_pos_bias=True,
    use_shared_rel_pos_bias=False,
    layer_scale_init_value=1e-5,
    drop_path_rate=0.0,
    final_norm=True)
