# PMT's decoder and recipe (tue-mps/pmt@54d73c9, image/configs/): variables that each configs/pmt/ config merges into
# its EoMT-DINOv3 sibling of the same task and size, whose data, pipelines, loss, post-processing and hooks it keeps.
# The DINOv3 encoder is frozen; checkpoints hold the decoder, the encoder is read from the backbone's init_cfg.
pmt_dinov3_large = dict(
    type='beit_mm.PMT',
    feature_indices=(5, 11, 17, 23),
    num_queries=200,
    num_blocks=6,
    mlp_ratio=1.0,
    layer_scale_init_value=1.0,
    norm_cfg=dict(type='SyncBN'),
    mask_annealing=dict(start_steps=[0, 23651, 32520, 41389, 50258, 59128],
                        end_steps=[3000, 38433, 47302, 56171, 65040, 73910]))
pmt_optim_wrapper = dict(
    _delete_=True,
    type='beit_mm.AmpOptimWrapper',
    dtype='auto',
    optimizer=dict(type='AdamW', lr=2e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    clip_grad=dict(max_norm=0.01, norm_type=2))
pmt_batch_size = 16
# 6000 linear warm-up steps from ~0, then cosine to 1e-9 at the config's max_iters: [pmt_warmup, dict(pmt_cosine,
# end=max_iters)] (MMEngine's LinearLR is multiplicative: it starts at 1e-9 x lr and reaches lr at step 6000)
pmt_warmup = dict(type='LinearLR', start_factor=1e-9, by_epoch=False, begin=0, end=6001)
pmt_cosine = dict(type='CosineAnnealingLR', eta_min=1e-9, by_epoch=False, begin=6000)
