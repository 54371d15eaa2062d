# PMT-S: pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py on a frozen DINOv3 ViT-S/16 reading blocks 2, 5,
# 8, 11. Published: 45.3 PQ (COCO panoptic val2017; tue-mps/pmt model_zoo/image/dinov3.md).
# Source: tue-mps/pmt@54d73c9 image/configs/coco/panoptic/pmt_s_640.yaml.
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vits16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-small.pth
_base_ = ['./pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py']
pretrained = 'checkpoints/dinov3-small.pth'
model = dict(backbone=dict(arch='small', init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
             feature_indices=(2, 5, 8, 11))
