# EoMT-L on DINOv3 ViT-L/16 (4 storage tokens, 2-D RoPE) for ADE20K semantic 512x512, 16 epochs.
# Published: 59.5 mIoU (ADE20K val; tue-mps/eomt model_zoo/dinov3.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov3/ade20k/semantic/eomt_large_512.yaml.
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vitl16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-large.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py', '../_base_/models/eomt_dinov3-large.py']
pretrained = 'checkpoints/dinov3-large.pth'
model = dict(
    backbone=dict(_delete_=True, **_base_.eomt_dinov3_large, img_size=512,
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    mask_annealing=dict(start_steps=[0, 6520, 9780, 13040], end_steps=[3000, 9780, 13040, 16300]))
base_lr = 2e-4
max_iters = 16 * 1263
optim_wrapper = dict(optimizer=dict(lr=base_lr), paramwise_cfg=dict(layer_decay_rate=1.0, llrd_l2_enabled=False))
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(2000, 3000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
