# PMT-L: a frozen DINOv3 ViT-L/16 and a plain mask decoder, COCO panoptic 640x640, 12 epochs on one GPU x 16 images.
# Published: 56.1 PQ (COCO panoptic val2017; tue-mps/pmt model_zoo/image/dinov3.md).
# Source: tue-mps/pmt@54d73c9 image/configs/coco/panoptic/pmt_l_640.yaml.
#   python tools/convert_checkpoint.py --model dinov3 --source hf dinov3-vitl16-pretrain-lvd1689m.safetensors \
#       checkpoints/dinov3-large.pth
#   python tools/convert_checkpoint.py --model pmt --source official pytorch_model.bin checkpoints/pmt-large-640.pth
_base_ = ['../eomt/eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-640x640.py', '../_base_/models/pmt_dinov3.py']
model = dict(**_base_.pmt_dinov3_large)
train_dataloader = dict(batch_size=_base_.pmt_batch_size)
optim_wrapper = _base_.pmt_optim_wrapper
param_scheduler = [_base_.pmt_warmup, dict(_base_.pmt_cosine, end=_base_.max_iters)]
