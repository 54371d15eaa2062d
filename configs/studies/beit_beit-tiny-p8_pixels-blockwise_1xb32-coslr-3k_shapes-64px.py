# MIM study, pixel-target arm: as beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py, but the targets are the
# per-patch normalized pixels of the backbone view with an L2 loss on masked patches (the BEiT paper's
# pixel-regression baseline, Table 4), so no tokenizer is needed.
_base_ = ['./beit_beit-tiny-p8_tokens-blockwise_1xb32-coslr-3k_shapes-64px.py']
model = dict(
    head=dict(_delete_=True, type='beit_mm.PixelRegressionHead', embed_dims={{_base_.embed_dims}},
              patch_size={{_base_.patch_size}}),
    target_generator=dict(_delete_=True, type='beit_mm.PatchPixelTarget', patch_size={{_base_.patch_size}}))
