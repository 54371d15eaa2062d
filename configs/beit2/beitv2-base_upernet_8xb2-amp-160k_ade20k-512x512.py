# BEiT v2 BEiT-B + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, mixed precision, from the BEiT v2
# pretrained-only ImageNet-1k checkpoint unilm beitv2_base_patch16_224_pt1k (1600 epochs of VQ-KD MIM): the shared
# relative position bias is copied into every block and resampled from 14x14 to 32x32 on conversion/load.
# Published: 53.1 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K", BEiTv2-base, beitv2_base_patch16_224_pt1k).
# Reference: unilm beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_512_slide_160k_ade20k.py
# (lines 13-16: upernet_beit + ade20k + schedule_160k; lines 31-34: init_values 0.1, drop_path_rate 0.15,
# out_indices [3, 5, 7, 11]; line 45: slide crop 512 stride 341; lines 48-50: AdamW 5e-5, betas (0.9, 0.999), wd 0.05,
# layer decay 0.75 over 12 layers; lines 52-56: poly power 1.0 to 0 with linear warmup 1500 iterations,
# warmup_ratio 1e-6; line 59: 2 images per GPU, 8 GPUs (README); lines 61-72: IterBasedRunnerAmp, use_fp16) and
# _base_/datasets/ade20k.py (ImageNet mean/std, Resize (2048, 512) ratio 0.5-2.0, RandomCrop 512 cat_max_ratio 0.75).
# AMP (dtype='auto'): bf16 without loss scaling where the GPU has bf16, else fp16 with dynamic loss scaling as unilm.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k.pth \
#       checkpoints/beitv2-base_pt1k.pth
_base_ = [
    '../_base_/models/upernet_beit.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
crop_size = (512, 512)
pretrained = 'checkpoints/beitv2-base_pt1k.pth'
model = dict(
    # unilm beit2 ade20k.py img_norm_cfg: ImageNet mean/std
    data_preprocessor=dict(size=crop_size, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           # no test-time padding: unilm's test pipeline has no Pad (ade20k.py lines 19-33); the
                           # base's size_divisor=16 would move the last slide window onto padding
                           test_cfg=None),
    backbone=dict(img_size=512, layer_scale_init_value=0.1, drop_path_rate=0.15, out_indices=(3, 5, 7, 11),
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
base_lr = 5e-5
optim_wrapper = dict(
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',  # bf16 where the GPU has it, else fp16 with dynamic loss scaling (CPU: bf16 if native, else fp32)
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    # unilm mmcv_custom/layer_decay_optimizer_constructor.py line 43: no weight decay on 1-D parameters and biases
    # only (its ('pos_embed', 'cls_token') never match 'backbone.'-prefixed names): tokens and tables decay.
    paramwise_cfg=dict(layer_decay_rate=0.75, weight_decay_rule='unilm', no_decay_names=()))
# mmcv 1.x poly + linear warmup (warmup_ratio multiplies the scheduled lr), stepped every iteration; see
# configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py.
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=160000 + 1),
]
train_dataloader = dict(batch_size=2)  # x 8 GPUs = 16
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
# unilm evaluates every 16k iterations and keeps the checkpoints only (schedule_160k.py lines 8-9: no save_best); the
# published mIoU is the last checkpoint's
default_hooks = dict(checkpoint=dict(save_best=None))
# unilm beit2/semantic_segmentation/README.md line 27 trains with `--seed 0 --deterministic`: one seed for every process
# (tools/train.py line 129), cudnn.deterministic = True and cudnn.benchmark = False (mmseg 0.x set_random_seed, which
# overrides the config's cudnn_benchmark = True of tools/train.py lines 73-75). MMEngine's randomness.deterministic
# would also call torch.use_deterministic_algorithms(True), which raises on CUDA in the backward of UPerHead's
# AdaptiveAvgPool2d and of bilinear interpolation; env_cfg.cudnn_deterministic is tools/train.py's cuDNN-only flag.
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
randomness = dict(seed=0)
# the whole model torch.compile'd (fullgraph) for training on CUDA: beit_mm.engine.compile, tests/models/test_compile_models.py
compile = dict(scope='model', devices=['cuda'])
