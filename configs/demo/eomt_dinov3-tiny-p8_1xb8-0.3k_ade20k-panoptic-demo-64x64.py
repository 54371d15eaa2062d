# Demo: EoMT panoptic segmentation on a tiny DINOv3 (as eomt_dinov3-tiny-p8_1xb8-1k_ade20k-demo-64x64.py) trained from
# scratch on the generated ADE20K panoptic demo (python tools/make_demo_data.py --layout ade20k-panoptic):
# eomt_beit-tiny-p8_1xb8-0.3k_ade20k-panoptic-demo-64x64.py with the backbone swapped, PQ/SQ/RQ.
_base_ = ['./eomt_beit-tiny-p8_1xb8-0.3k_ade20k-panoptic-demo-64x64.py']
model = dict(
    backbone=dict(
        _delete_=True,
        type='beit_mm.DINOv3',
        arch=dict(embed_dims={{_base_.embed_dims}}, num_layers=4, num_heads=3, mlp_ratio=4.0),
        img_size={{_base_.img_size}},
        patch_size=8,
        num_register_tokens=4,
        layer_scale_init_value=0.1,
        rope_rescale_coords=2.0,
        drop_path_rate=0.0,
        final_norm=True))
