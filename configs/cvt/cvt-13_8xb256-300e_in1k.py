# CvT-13 on ImageNet-1k from scratch, 224x224, 8 GPUs x 256 images, 300 epochs. Published: 81.6 top-1 (CvT paper).
# Source: microsoft/CvT@f851e681 experiments/imagenet/cvt/cvt-13-224x224.yaml; warmup and cosine step per iteration.
_base_ = [
    '../_base_/models/cvt-13_in1k.py', '../_base_/datasets/imagenet_bs256_cvt_224.py',
    '../_base_/schedules/imagenet_bs2048_adamw_cvt.py', '../_base_/default_runtime_cls.py'
]
train_dataloader = dict(batch_size=256)
optim_wrapper = dict(type='beit_mm.AmpOptimWrapper', dtype='auto')
env_cfg = dict(cudnn_benchmark=True)
