# BEiT-B + UPerNet, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the ImageNet-22k fine-tuned checkpoint
# (unilm beit_base_patch16_224_pt22k_ft22k; convert it first:
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth).
# Published: 53.6 mIoU (unilm beit/README.md, ADE20K table), 53.08 (mmseg 0.x configs/beit/README.md).
# Reference: unilm beit/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_640_slide_160k_ade20k_pt2ft.py
# (lines 54-65: AdamW 3e-5, wd 0.05, layer decay 0.9, poly + linear warmup 1500 iterations with warmup_ratio 1e-6,
# 2 images x 8 GPUs, 160k iterations = 160k updates) and _base_/datasets/ade20k_640x640.py (ImageNet mean/std).
# Precision: mixed, as unilm (upernet_beit_base_12_640_slide_160k_ade20k_pt2ft.py line 67:
# runner IterBasedRunnerAmp; lines 71-77: DistOptimizerHook use_fp16=True, i.e. mmcv_custom/train_api.py
# lines 67-68: apex amp O1, fp16 with dynamic loss scaling):
# beit_mm.AmpOptimWrapper dtype='auto' trains in bf16 where the GPU has it and in fp16 with dynamic loss scaling
# where it does not (V100); on a CPU, bf16 with AVX512-BF16/AMX, else fp32.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'
model = dict(
    # unilm/mmseg 0.x ade20k_640x640.py img_norm_cfg: ImageNet mean/std (not BEiT pretraining's 0.5/0.5)
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           # slide inference pads nothing at test time, as unilm and mmseg 0.x (no Pad in their
                           # test pipelines; the base's size_divisor=16 would move the last window onto padding)
                           test_cfg=None),
    backbone=dict(img_size=640, drop_path_rate=0.1, init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))
base_lr = 3e-5
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # unilm mmcv_custom/layer_decay_optimizer_constructor.py line 43: no weight decay on 1-D parameters and biases
    # only (its ('pos_embed', 'cls_token') never match 'backbone.'-prefixed names): tokens and tables decay.
    paramwise_cfg=dict(layer_decay_rate=0.9, weight_decay_rule='unilm', no_decay_names=()))
# mmcv 1.x lr_updater.py (LrUpdaterHook.before_train_iter/get_warmup_lr, PolyLrUpdaterHook.get_lr), stepped every
# iteration: lr(i) = base * (1 - i / max_iters) * (warmup_ratio + (1 - warmup_ratio) * min(i, 1500) / 1500).
# The two schedulers below multiply (MMEngine's chained form; T = end - begin - 1), which is exactly that.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_dataloader = dict(batch_size=2)  # x 8 GPUs = 16
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
# unilm beit/semantic_segmentation/README.md line 27 trains with `--seed 0 --deterministic`: one seed for every process
# (tools/train.py line 129), cudnn.deterministic = True and cudnn.benchmark = False (mmseg 0.x set_random_seed, which
# overrides the config's cudnn_benchmark = True of tools/train.py lines 73-75). MMEngine's randomness.deterministic
# would also call torch.use_deterministic_algorithms(True), which raises on CUDA in the backward of UPerHead's
# AdaptiveAvgPool2d and of bilinear interpolation; env_cfg.cudnn_deterministic is tools/train.py's cuDNN-only flag.
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
randomness = dict(seed=0)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
