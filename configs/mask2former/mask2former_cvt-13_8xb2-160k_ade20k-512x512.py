# Mask2Former on CvT-13, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, from the ImageNet-1k CvT-13 checkpoint
# (microsoft/CvT CvT-13-224x224-IN-1k.pth; convert it first, the classifier head is dropped:
#   python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth \
#       checkpoints/cvt-13_in1k.pth
# Published: none (no CvT Mask2Former run exists). This follows mmseg's Swin-T Mask2Former recipe, Swin-T being the
# hierarchical backbone of CvT-13's size (28M vs 20M parameters) with a published Mask2Former ADE20K run (48.66 mIoU,
# mmseg v1.2.2 configs/mask2former/metafile.yaml:206, 8x A100, batch 16: :210,214).
# Sources, open-mmlab/mmsegmentation v1.2.2 (as shipped in the mmsegmentation 1.2.2 wheel, mmseg/.mim/configs):
# - S = configs/mask2former/mask2former_swin-t_8xb2-160k_ade20k-512x512.py (the parameter-wise lr and decay);
# - M = configs/mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py (S's base: head, data, optimizer, schedule);
# - D = configs/_base_/datasets/ade20k.py (M's dataset: the test pipeline).
# Known differences from the Swin-T run:
# - backbone: CvT-13 with its ImageNet drop path per stage (0, 0, 0.1) where Swin-T has 0.3 (S:17); its levels are
#   the three stage maps plus the stage-2 map max-pooled to stride 32 (configs/_base_/models/mask2former_cvt.py);
# - the backbone's lr x 0.1 and no weight decay on its norms and position parameters (S:25-49) name CvT's parameters:
#   every LayerNorm and the BatchNorm of each conv projection, and stage 2's cls token (CvT's only position-like
#   parameter, Swin's absolute_pos_embed / relative_position_bias_table in S:35-36);
# - test: slide inference, 512 windows at stride 341 (as configs/cvt/cvt-13_upernet_8xb2-160k_ade20k-512x512.py),
#   where M:136 runs the whole image: whole-image inference of a 2048x512 image would attend over 65k stage-0 tokens.
_base_ = [
    '../_base_/models/mask2former_cvt.py', '../_base_/datasets/ade20k_512x512.py', '../_base_/default_runtime.py',
    '../_base_/schedules/schedule_160k.py'
]
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)  # M:3
crop_size = (512, 512)  # M:5
pretrained = 'checkpoints/cvt-13_in1k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size,  # M:13
                           test_cfg=None),  # slide windows of the resized image, unpadded (M:14 pads for 'whole')
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),  # M:141
    dict(type='RandomChoiceResize', scales=[int(512 * x * 0.1) for x in range(5, 21)],  # M:142-146
         resize_type='ResizeShortestEdge', max_size=2048),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),  # M:147
    dict(type='RandomFlip', prob=0.5),  # M:148
    dict(type='PhotoMetricDistortion'),  # M:149
    dict(type='PackSegInputs'),
]
train_pipeline_exact = train_pipeline  # this config trains with mmseg's transforms: the exact pipeline
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),  # D:20
    dict(type='LoadAnnotations', reduce_zero_label=True),  # D:23
    dict(type='PackSegInputs'),
]
# M:152; x 8 GPUs (M:199, metafile.yaml:214) = 16
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
auto_scale_lr = dict(enable=False, base_batch_size=16)  # M:200
# S:25-49 for CvT-13 (depths 1, 2, 10: CvT experiments/imagenet/cvt/cvt-13-224x224.yaml): the backbone at lr x 0.1,
# its norms and cls token also without weight decay; queries and level embeddings at lr x 1 without weight decay
# (M:155, 164-167); every other norm layer (the head's GroupNorm / LayerNorm) without weight decay (M:169).
depths = [1, 2, 10]
backbone_norm_multi = dict(lr_mult=0.1, decay_mult=0.0)  # S:28
backbone_embed_multi = dict(lr_mult=0.1, decay_mult=0.0)  # S:29
embed_multi = dict(lr_mult=1.0, decay_mult=0.0)  # S:30, M:155
custom_keys = {
    'backbone': dict(lr_mult=0.1, decay_mult=1.0),  # S:32, M:164
    'backbone.norm': backbone_norm_multi,  # S:34
    'backbone.stage2.cls_token': backbone_embed_multi,  # as S:35-36 for Swin's position parameters
    'query_embed': embed_multi,  # S:37, M:165
    'query_feat': embed_multi,  # S:38, M:166
    'level_embed': embed_multi,  # S:39, M:167
}
custom_keys.update({f'backbone.stage{s}.patch_embed.norm': backbone_norm_multi for s in range(3)})  # S:33,46-49
custom_keys.update({  # S:41-45: every block's norms (norm1, norm2) and the BatchNorm of its q/k/v conv projections
    f'backbone.stage{s}.blocks.{b}.{norm}': backbone_norm_multi
    for s, depth in enumerate(depths) for b in range(depth)
    for norm in ('norm', 'attn.conv_proj_q.bn', 'attn.conv_proj_k.bn', 'attn.conv_proj_v.bn')
})
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)),  # M:156-157
    clip_grad=dict(max_norm=0.01, norm_type=2),  # M:161
    paramwise_cfg=dict(custom_keys=custom_keys, norm_decay_mult=0.0))  # S:51-52, M:162-169
param_scheduler = [dict(type='PolyLR', eta_min=0, power=0.9, begin=0, end=160000, by_epoch=False)]  # M:171-179
train_cfg = dict(type='IterBasedTrainLoop', max_iters=160000, val_interval=5000)  # M:182-183
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=5000, save_best='mIoU'))  # M:190
