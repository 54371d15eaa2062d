# BEiT-B + UPerNet on ADE20K 512x512 from a beit_mm masked-image-modeling checkpoint (BEiT paper Table 3: 45.6 mIoU
# from ImageNet-1k self-supervision only). lr 7e-4 and layer decay 0.65 (the pretrained-only recipe) come from the
# base config; only the checkpoint differs: a beit_mm MIM run's file, backbone under `backbone.`, whose shared
# relative position bias is copied into every block and resampled from 14x14 to 32x32 on load.
_base_ = ['./beit-base_upernet_8xb2-160k_ade20k-512x512.py']
mim_checkpoint = 'work_dirs/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k/epoch_800.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=mim_checkpoint, prefix='backbone.')))
