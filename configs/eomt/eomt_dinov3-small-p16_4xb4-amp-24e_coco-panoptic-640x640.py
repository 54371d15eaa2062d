# EoMT-S on DINOv3 ViT-S/16 for COCO panoptic 640x640, 24 epochs: eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-
# 640x640.py with ViT-S and L2 = 3. Published: 47.2 PQ (COCO panoptic val2017; tue-mps/eomt model_zoo/dinov3.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov3/coco/panoptic/eomt_small_640_2x.yaml. The weights are gated (DINOv3
# License on huggingface.co/facebook/dinov3-vits16-pretrain-lvd1689m):
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vits16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-small.pth
_base_ = ['./eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-640x640.py']
pretrained = 'checkpoints/dinov3-small.pth'
max_iters = 24 * 7391
model = dict(
    backbone=dict(arch='small', init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=3,
    mask_annealing=dict(start_steps=[0, 73910, 118256], end_steps=[3000, 103474, 147820]))
param_scheduler = [
    dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=(2000, 3000), poly_power=0.9, by_epoch=False, begin=0,
         end=max_iters),
]
train_cfg = dict(max_iters=max_iters)
