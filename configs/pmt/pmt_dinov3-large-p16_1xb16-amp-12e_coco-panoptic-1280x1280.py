# PMT-L at 1280x1280: pmt_dinov3-large-p16_1xb16-amp-12e_coco-panoptic-640x640.py on the EoMT-DINOv3 1280 sibling's
# data. Published: 58.1 PQ (COCO panoptic val2017; tue-mps/pmt model_zoo/image/dinov3.md).
# Source: tue-mps/pmt@54d73c9 image/configs/coco/panoptic/pmt_l_1280.yaml.
_base_ = ['../eomt/eomt_dinov3-large-p16_4xb4-amp-12e_coco-panoptic-1280x1280.py', '../_base_/models/pmt_dinov3.py']
model = dict(**_base_.pmt_dinov3_large)
train_dataloader = dict(batch_size=_base_.pmt_batch_size)
optim_wrapper = _base_.pmt_optim_wrapper
param_scheduler = [_base_.pmt_warmup, dict(_base_.pmt_cosine, end=_base_.max_iters)]
