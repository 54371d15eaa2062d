# CPU demo: the MIM demo's tiny BEiT (configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py: patch 16, 96 wide,
# 4 blocks) + UPerNet fine-tuned from that run's checkpoint on the generated ADE20K-layout demo data, 64x64 crops
# (4x4 patch grid: the checkpoint's shared 6x6 relative position bias is copied into every block and resampled on
# load), 1 process x 8 images, 300 iterations. Everything else as beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py.
#   python tools/train.py configs/demo/beit-tiny-p16_beit-pre_upernet_1xb8-0.3k_ade20k-demo-64x64.py \
#       --cfg-options model.backbone.init_cfg.checkpoint=work_dirs/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px/iter_300.pth
# From scratch with the same budget: add (tools/analysis/mim_study.py runs such pairs over seeds on the study data)
#       --cfg-options model.backbone.init_cfg=None
_base_ = ['./beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py']
mim_checkpoint = 'work_dirs/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px/iter_300.pth'
max_iters = 300
model = dict(
    data_preprocessor=dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(patch_size=16, init_cfg=dict(type='Pretrained', checkpoint=mim_checkpoint, prefix='backbone.')))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(
    logger=dict(interval=25),
    checkpoint=dict(interval=max_iters, max_keep_ckpts=1, save_best=None))
