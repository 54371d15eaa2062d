# EoMT-L on DINOv3 ViT-L/16 (LVD-1689M) for COCO instance segmentation at 640x640: the official
# configs/dinov3/coco/instance/eomt_large_640.yaml (github.com/tue-mps/eomt @ 7bd19dd), the DINOv2 run of
# eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py with another backbone, lr 2e-4, no decay of the
# last L2 blocks and warmup (2000, 3000) (the annealing steps are the DINOv2 run's).
# Published: 45.9 mask AP (COCO val2017; tue-mps/eomt model_zoo/dinov3.md:89-95; weights on HF:
# tue-mps/coco_instance_eomt_large_640_dinov3, deltas to the DINOv3 weights).
# Start: checkpoints/dinov3-large.pth (gated; as eomt_dinov3-large-p16_4xb4-amp-16e_ade20k-512x512.py says):
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vitl16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-large.pth
_base_ = ['./eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py', '../_base_/models/eomt_dinov3-large.py']
pretrained = 'checkpoints/dinov3-large.pth'
model = dict(
    backbone=dict(_delete_=True, **_base_.eomt_dinov3_large, img_size=640,
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
optim_wrapper = dict(optimizer=dict(lr=2e-4), paramwise_cfg=dict(llrd_l2_enabled=False))
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(2000, 3000), poly_power=0.9, by_epoch=False, begin=0,
         end={{_base_.max_iters}}),
]
