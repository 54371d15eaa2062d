# MIM study, BEiT v2's target arm: as beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py (same backbone,
# blockwise mask, budget, optimizer and probe), but the targets are the ids of a VQ-KD tokenizer
# (configs/studies/vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py: 256 codes, one per 8 px patch) distilled
# from a backbone pretrained label-free on the same pool, instead of the pixel-reconstructing dVAE's. The tokenizer
# reads the 64 px view as 0..255 RGB (as BEiT v2). Only the targets change: no cls-token
# pretraining, so the arm isolates the tokenizer (BEiT v2's Table 7 ablates the two separately).
#   python tools/train.py configs/studies/beit_beit-tiny-p8_vqkd-blockwise_1xb32-coslr-3k_shapes-64px.py \
#       --cfg-options model.target_generator.init_cfg.checkpoint=VQKD_TOKENIZER.pth \
#           train_dataloader.dataset.data_root=data/shapes_unlabeled
_base_ = ['./beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py']
vqkd_checkpoint = 'work_dirs/mim_study/vqkd_tokenizer.pth'
vqkd_arch = dict(
    encoder=dict(embed_dims=128, num_layers=4, num_heads=4, mlp_ratio=4.0),
    decoder=dict(embed_dims=128, num_layers=1, num_heads=4, mlp_ratio=4.0),
    img_size=64, patch_size=8, num_codes=256, code_dims=32, out_dims=128)
model = dict(
    head=dict(vocab_size=vqkd_arch['num_codes']),
    target_generator=dict(_delete_=True, type='beit_mm.VQKD', arch=vqkd_arch, autocast_dtype=None,
                          init_cfg=dict(type='Pretrained', checkpoint=vqkd_checkpoint)))
