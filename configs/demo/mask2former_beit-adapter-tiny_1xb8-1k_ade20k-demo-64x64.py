# Demo: Mask2Former on ViT-Adapter (beit_mm.BEiTAdapter) over a tiny BEiT (4 blocks, 96 wide, 16x16-pixel patches),
# trained FROM SCRATCH on the generated ADE20K-layout demo data (python tools/make_demo_data.py), 1 process x
# 8 images, 1k iterations, 64x64 crops: the Mask2Former demo's head, loss, data, optimizer and schedule
# (configs/demo/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py) with the adapter's 4 levels (strides
# 4/8/16/32) in place of the pyramid neck, the backbone of the ViT-Adapter UPerNet demo
# (beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py).
_base_ = ['./mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py', '../_base_/models/beit-adapter-tiny_demo.py']
model = dict(
    data_preprocessor=dict(test_cfg=dict(_delete_=True, size_divisor=32)),
    backbone=dict(_delete_=True, **_base_.beit_adapter_tiny),
    neck=None)
