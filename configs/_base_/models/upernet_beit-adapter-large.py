# ViT-Adapter-L on BEiT-L + UPerNet, the recipe of czczup/ViT-Adapter@fd64a51 segmentation/configs/ade20k/
# upernet_beit_adapter_large_640_160k_ade20k_ss.py without its data: the configs in configs/vit_adapter/ add a dataset
# base, the crop size and their pipelines.
_base_ = ['./upernet_beit.py', '../default_runtime.py', '../schedules/schedule_160k.py']
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
model = dict(
    data_preprocessor=dict(size=(640, 640), mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           test_cfg=None),
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',
        img_size=640,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.3,
        conv_inplane=64,
        n_points=4,
        deform_num_heads=16,
        cffn_ratio=0.25,
        deform_ratio=0.5,
        with_cp=True,
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        # the BEiT checkpoint has no adapter weights: they keep their init
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,
    decode_head=dict(in_channels=[1024, 1024, 1024, 1024], num_classes=150, channels=1024),
    auxiliary_head=dict(in_channels=1024, num_classes=150),
    test_cfg=dict(mode='slide', crop_size=(640, 640), stride=(426, 426)))
auto_scale_lr = dict(enable=False, base_batch_size=16)
base_lr = 2e-5
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=base_lr, betas=(0.9, 0.999), weight_decay=0.05),
    constructor='beit_mm.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.90, weight_decay_rule='unilm', no_decay_names=()))
max_iters = 160000
# mmcv 1.x's warmup multiplies the poly lr of the same iteration: two chained schedulers
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500 + 1),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=0, end=max_iters + 1),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=16000)
default_hooks = dict(checkpoint=dict(interval=1000, max_keep_ckpts=1, save_best='mIoU'))
# ViT-Adapter trains with --deterministic: cudnn.deterministic on, benchmark off
env_cfg = dict(cudnn_benchmark=False, cudnn_deterministic=True)
