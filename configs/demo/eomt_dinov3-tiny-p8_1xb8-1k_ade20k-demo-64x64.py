# Demo: EoMT on a tiny DINOv3 (4 blocks, 96 wide, 3 heads, 4 storage tokens, 2-D rotary position embedding, no
# absolute position embedding, 8x8-pixel patches) trained FROM SCRATCH on the generated ADE20K-layout demo data
# (python tools/make_demo_data.py): eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py with the backbone swapped (the same
# data, optimizer, schedule, queries and annealing), so the two backbones compare at the same budget. Layer scale 0.1
# as the BEiT demo's (the released DINOv3s' 1e-5 is for their pretraining, which this demo does not have).
_base_ = ['./eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py']
model = dict(
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
        final_norm=True))
