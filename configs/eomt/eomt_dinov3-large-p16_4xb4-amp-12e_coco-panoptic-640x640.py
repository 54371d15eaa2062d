# EoMT-L on DINOv3 ViT-L/16 for COCO panoptic 640x640. Published: 56.8 PQ (COCO panoptic val2017; tue-mps/eomt
# model_zoo/dinov3.md). Source: tue-mps/eomt@7bd19dd configs/dinov3/coco/panoptic/eomt_large_640.yaml.
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vitl16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-large.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-panoptic-640x640.py', '../_base_/models/eomt_dinov3-large.py']
pretrained = 'checkpoints/dinov3-large.pth'
model = dict(
    backbone=dict(_delete_=True, **_base_.eomt_dinov3_large, img_size={{_base_.img_size}},
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    mask_annealing=dict(start_steps=[0, 29564, 44346, 59128], end_steps=[3000, 44346, 59128, 73910]))
optim_wrapper = dict(optimizer=dict(lr=2e-4), paramwise_cfg=dict(llrd_l2_enabled=False))
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(2000, 3000), poly_power=0.9, by_epoch=False, begin=0,
         end={{_base_.max_iters}}),
]
