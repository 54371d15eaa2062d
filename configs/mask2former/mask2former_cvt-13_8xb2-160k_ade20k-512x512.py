# Mask2Former on CvT-13, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, from microsoft/CvT's CvT-13 IN-1k file.
# Published: none (no CvT Mask2Former run exists); mmseg's Swin-T Mask2Former recipe, slide inference.
# Source: open-mmlab/mmsegmentation v1.2.2 configs/mask2former/mask2former_swin-t_8xb2-160k_ade20k-512x512.py.
#   python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth \
#       checkpoints/cvt-13_in1k.pth
_base_ = [
    '../_base_/models/mask2former_cvt.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
crop_size = (512, 512)
pretrained = 'checkpoints/cvt-13_in1k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size,
                           test_cfg=None),
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomChoiceResize', scales=[int(512 * x * 0.1) for x in range(5, 21)],
         resize_type='ResizeShortestEdge', max_size=2048),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)
depths = [1, 2, 10]
backbone_norm_multi = dict(lr_mult=0.1, decay_mult=0.0)
backbone_embed_multi = dict(lr_mult=0.1, decay_mult=0.0)
embed_multi = dict(lr_mult=1.0, decay_mult=0.0)
custom_keys = {
    'backbone': dict(lr_mult=0.1, decay_mult=1.0),
    'backbone.norm': backbone_norm_multi,
    'backbone.stage2.cls_token': backbone_embed_multi,
    'query_embed': embed_multi,
    'query_feat': embed_multi,
    'level_embed': embed_multi,
}
custom_keys.update({f'backbone.stage{s}.patch_embed.norm': backbone_norm_multi for s in range(3)})
custom_keys.update({
    f'backbone.stage{s}.blocks.{b}.{norm}': backbone_norm_multi
    for s, depth in enumerate(depths) for b in range(depth)
    for norm in ('norm', 'attn.conv_proj_q.bn', 'attn.conv_proj_k.bn', 'attn.conv_proj_v.bn')
})
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)),
    clip_grad=dict(max_norm=0.01, norm_type=2),
    paramwise_cfg=dict(custom_keys=custom_keys, norm_decay_mult=0.0))
param_scheduler = [dict(type='PolyLR', eta_min=0, power=0.9, begin=0, end=160000, by_epoch=False)]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=5000)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=5000, save_best='mIoU'))
