# EoMT (Kerssies et al. CVPR 2025) on a plain BEiT: queries join the patch tokens for the last L2 blocks, masked
# attention annealed away (custom_hooks need beit_mm.EoMTMaskAnnealingHook). Source: tue-mps/eomt@7bd19dd
# configs/dinov2/ade20k/semantic/eomt_large_512.yaml. Configs set the backbone, L2, the annealing steps and test_cfg.
model = dict(
    type='beit_mm.EoMT',
    backbone=dict(
        type='beit_mm.BEiT',
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=0.1,
        drop_path_rate=0.0,
        final_norm=True),
    num_classes=150,
    num_queries=100,
    masked_attn=True,
    loss=dict(
        type='beit_mm.MaskClassificationLoss',
        class_weight=2.0,
        mask_weight=5.0,
        dice_weight=5.0,
        no_object_weight=0.1,
        num_points=12544,
        oversample_ratio=3.0,
        importance_sample_ratio=0.75),
    ignore_index=255)
