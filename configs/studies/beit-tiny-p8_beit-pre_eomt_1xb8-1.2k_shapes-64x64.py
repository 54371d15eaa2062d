# MIM study, stage 3 with EoMT (tools/analysis/mim_study.py --heads eomt): the study's UPerNet fine-tuning config with
# the neck and heads replaced by EoMT (100 queries for the last 2 of 6 blocks, no drop path, final norm), annealing
# structure of tue-mps/eomt@7bd19dd configs/dinov2/ade20k/semantic/eomt_large_512.yaml at 1200 iterations (U = 332).
#   python tools/train.py configs/studies/beit-tiny-p8_beit-pre_eomt_1xb8-1.2k_shapes-64x64.py \
#       --cfg-options model.backbone.init_cfg.checkpoint=work_dirs/mim_study/mim/tokens-blockwise_seed0/iter_3000.pth
_base_ = ['./beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py']
model = dict(
    _delete_=True,
    type='beit_mm.EoMT',
    data_preprocessor={{_base_.model.data_preprocessor}},
    backbone=dict(
        type='beit_mm.BEiT',
        arch=dict(embed_dims={{_base_.embed_dims}}, num_layers=6, num_heads=4, mlp_ratio=4.0),
        img_size=64,
        patch_size=8,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=0.1,
        drop_path_rate=0.0,
        final_norm=True,
        init_cfg=dict(type='Pretrained', checkpoint={{_base_.mim_checkpoint}}, prefix='backbone.')),
    num_classes={{_base_.num_classes}},
    num_queries=100,
    num_blocks=2,
    masked_attn=True,
    mask_annealing=dict(start_steps=[332, 664], end_steps=[664, 996], poly_power=0.9),
    loss=dict(
        type='beit_mm.MaskClassificationLoss',
        class_weight=2.0,
        mask_weight=5.0,
        dice_weight=5.0,
        no_object_weight=0.1,
        num_points=12544,
        oversample_ratio=3.0,
        importance_sample_ratio=0.75),
    ignore_index=255,
    test_cfg=dict(mode='whole'))
custom_hooks = [
    dict(type='beit_mm.SegDatasetCheckHook', num_samples=200),
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
    dict(type='beit_mm.EoMTMaskAnnealingHook'),
]
