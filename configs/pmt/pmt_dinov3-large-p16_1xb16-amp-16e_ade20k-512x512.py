# PMT-L for ADE20K semantic 512x512, 16 epochs: the PMT decoder (100 queries) on the EoMT-DINOv3 ADE20K sibling's data
# and sliding-window test. Published: 58.5 mIoU (ADE20K val; tue-mps/pmt model_zoo/image/dinov3.md).
# Source: tue-mps/pmt@54d73c9 image/configs/ade20k/semantic/pmt_l_512.yaml.
_base_ = ['../eomt/eomt_dinov3-large-p16_4xb4-amp-16e_ade20k-512x512.py', '../_base_/models/pmt_dinov3.py']
model = dict(_base_.pmt_dinov3_large,
             num_queries=100,
             mask_annealing=dict(start_steps=[0, 5384, 7403, 9422, 11442, 13461],
                                 end_steps=[3000, 8749, 10769, 12788, 14807, 16826]))
train_dataloader = dict(batch_size=_base_.pmt_batch_size)
optim_wrapper = _base_.pmt_optim_wrapper
param_scheduler = [_base_.pmt_warmup, dict(_base_.pmt_cosine, end=_base_.max_iters)]
