# CvT-13 on ImageNet-1k from scratch, 224x224, 8 GPUs x 256 images = total batch 2048, lr 2e-3 (2.5e-4 per GPU as
# the official code scales it), 300 epochs; paper: 81.6 top-1. Recipe of microsoft/CvT
# experiments/imagenet/cvt/cvt-13-224x224.yaml (see the schedule and dataset bases): AdamW, wd 0.05 (none on norms,
# biases, cls_token), 5 warmup epochs, cosine, mixup 0.8, cutmix 1.0, RandAugment rand-m9-mstd0.5-inc1, label
# smoothing 0.1, random erasing 0.25, top-1/top-5 accuracy. Class order = sorted wnids (see the dataset base).
# drop path per stage [0, 0, 0.1] (linear inside each stage, as lib/models/cls_cvt.py); the last incomplete batch
# is dropped (timm create_loader: drop_last=is_training). Values pinned in tests/configs/reference_recipes.py.
# Differences to the official run: per-iteration warmup/cosine (official: per epoch, timm scheduler).
_base_ = [
    '../_base_/models/cvt-13_in1k.py', '../_base_/datasets/imagenet_bs256_cvt_224.py',
    '../_base_/schedules/imagenet_bs2048_adamw_cvt.py', '../_base_/default_runtime_cls.py'
]
train_dataloader = dict(batch_size=256)  # x 8 GPUs = 2048
# Mixed precision as the official run (cvt-13-224x224.yaml lines 4-5: AMP.ENABLED true; lib/core/function.py line 47:
# autocast, tools/train.py line 123: GradScaler, dynamic loss scaling): bf16 where the GPU has it, else fp16 with
# dynamic loss scaling (CPU: bf16 with AVX512-BF16/AMX, else fp32).
optim_wrapper = dict(type='beit_mm.AmpOptimWrapper', dtype='auto')
# cudnn.benchmark = True: cvt-13-224x224.yaml line 49 (CUDNN.BENCHMARK; lib/utils/utils.py line 72)
env_cfg = dict(cudnn_benchmark=True)
