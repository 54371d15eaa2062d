# BEiT-L + UPerNet, ADE20K 640x640, 8 GPUs x 1 image with 2-step gradient accumulation (effective 16), mixed
# precision, 320k iterations = 160k optimizer updates ("160k" in the name counts updates, as unilm's), from the
# ImageNet-22k fine-tuned checkpoint (unilm beit_large_patch16_224_pt22k_ft22k).
# Published: 56.7 mIoU (unilm beit/README.md), 56.33 (mmseg 0.x configs/beit/README.md, fp16 8x1 config).
# Reference: unilm beit/semantic_segmentation/configs/beit/upernet/upernet_beit_large_24_640_slide_160k_ade20k_pt2ft.py
# (line 16: _base_ schedule_320k = 320000 iterations; line 18: "samples_per_gpu 1 and update_interval 2, the total
# update step keep 160k"; lines 55-63: AdamW 2e-5, wd 0.05, layer decay 0.95, poly + linear warmup 3000 iterations
# with warmup_ratio 1e-6; lines 73-75: DistOptimizerHook update_interval=2) and mmseg 0.x
# configs/beit/upernet_beit-large_fp16_8x1_640x640_160k_ade20k.py (schedule_320k, GradientCumulativeFp16OptimizerHook
# cumulative_iters=2). mmcv's lr hook steps every iteration, not every update: the poly decay runs over 320k
# iterations and the 3000 warmup iterations are 1500 updates. MMEngine's schedulers also step every iteration.
# Precision: mixed, as unilm (line 68: runner IterBasedRunnerAmp; lines 73-80: DistOptimizerHook use_fp16=True, i.e.
# mmcv_custom/train_api.py lines 67-68: apex amp O1, fp16 with dynamic loss scaling): dtype='auto' below.
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_640x640.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (640, 640)
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
model = dict(
    # unilm/mmseg 0.x ade20k_640x640.py img_norm_cfg: ImageNet mean/std
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           # slide inference pads nothing at test time, as unilm and mmseg 0.x (no Pad in their
                           # test pipelines; the base's size_divisor=16 would move the last window onto padding)
                           test_cfg=None),
    backbone=dict(
        arch='large',
        img_size=640,
        layer_scale_init_value=1e-6,  # unilm init_values=1e-6 (line 33), mmseg 0.x init_values=1e-6
        drop_path_rate=0.2,
        out_indices=(7, 11, 15, 23),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    neck=dict(embed_dim=1024),
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], channels=1024),
    auxiliary_head=dict(in_channels=1024),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(426, 426)))
base_lr = 2e-5
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    accumulative_counts=2,
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # unilm mmcv_custom/layer_decay_optimizer_constructor.py line 43: no weight decay on 1-D parameters and biases
    # only (its ('pos_embed', 'cls_token') never match 'backbone.'-prefixed names): tokens and tables decay.
    paramwise_cfg=dict(layer_decay_rate=0.95, weight_decay_rule='unilm', no_decay_names=()))
max_iters = 320000  # unilm/mmseg 0.x schedule_320k
# mmcv 1.x poly + linear warmup (warmup_ratio multiplies the scheduled lr), stepped every iteration; see the B 640
# config. With accumulative_counts=2 the optimizer steps at iterations 1, 3, 5, ... (unilm every_n_iters(2)).
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=3000 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=32000)
default_hooks = dict(checkpoint=dict(interval=32000))
train_dataloader = dict(batch_size=1)  # x 8 GPUs x 2 accumulation steps = 16
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
