# BEiT-B + UPerNet, ADE20K 512x512, from a beit_mm MIM checkpoint (backbone under `backbone.`); the rest as the base.
# Published: 45.6 mIoU from ImageNet-1k self-supervision only (BEiT paper Table 3).
_base_ = ['./beit-base_upernet_8xb2-160k_ade20k-512x512.py']
mim_checkpoint = 'work_dirs/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k/epoch_800.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=mim_checkpoint, prefix='backbone.')))
