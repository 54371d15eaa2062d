# EoMT on a DINOv2-style ViT-L (patch 16, 4 register tokens, absolute position embeddings for the patches only, layer
# scale, no relative position bias): the official ADE20K semantic configuration, github.com/tue-mps/eomt @ 7bd19dd
# configs/dinov2/ade20k/semantic/eomt_large_512.yaml, and the architecture of HF transformers'
# EomtForUniversalSegmentation (transformers 4.57.6, models/eomt/modeling_eomt.py), whose weights this config holds
# exactly (tests/models/test_eomt_hf.py: logits within 1e-4 of HF's with the same weights).
# Published: 58.4 mIoU (ADE20K val; tue-mps/eomt model_zoo/dinov2.md:191-196; weights on HF:
# tue-mps/ade20k_semantic_eomt_large_512).
#
# Start, as the official run: DINOv2-L with 4 registers (timm vit_large_patch14_reg4_dinov2.lvd142m), its 14-px patch
# embedding PI-resized to 16 px and its 37x37 position embedding resized to 32x32 as timm does when EoMT builds it
# (models/vit.py:33-39; beit_mm/converters/dinov2.py, tests/converters/test_convert_dinov2.py):
#   python tools/convert_checkpoint.py --model dinov2 --source timm --img-size 512 --patch-size 16 \
#       vit_large_patch14_reg4_dinov2.lvd142m.safetensors checkpoints/dinov2-large-reg4_p16-512.pth
#   (the model.safetensors of the HF repository timm/vit_large_patch14_reg4_dinov2.lvd142m, saved under that name)
# The official ADE20K EoMT weights, from the HF folder tue-mps/ade20k_semantic_eomt_large_512, evaluate with it:
#   python tools/convert_checkpoint.py --model eomt --source hf model.safetensors checkpoints/eomt-large-512_ade20k.pth
#   python tools/test.py configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py \
#       checkpoints/eomt-large-512_ade20k.pth
#
# Official values: everything of the BEiT-B config's header (eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py: lr 1e-4,
# AdamW wd 0.05 on every parameter, llrd 0.8, two-stage warmup (500, 1000) + poly 0.9, clip 0.01, 31 epochs of 1263
# steps at 16, loss 2/5/5/0.1 with 12544 points, data and test windows), and for ViT-L:
# - ViT-L/16 with 4 registers (models/vit.py:19-20: vit_large_patch14_reg4_dinov2 built with patch_size=16);
#   1024 wide, 24 blocks, 16 heads, MLP ratio 4, LayerNorm eps 1e-6 (timm's DINOv2 ViT-L);
# - L2 = 4 blocks with queries (models/eomt.py:24 default), 100 queries (eomt_large_512.yaml:18);
# - mask annealing, poly 0.9: starts 6520, 13040, 19560, 26080; ends 13040, 19560, 26080, 32600
#   (eomt_large_512.yaml:13-14).
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
pretrained = 'checkpoints/dinov2-large-reg4_p16-512.pth'
model = dict(
    backbone=dict(
        arch='large',
        img_size=512,
        patch_size=16,
        use_abs_pos_emb=True,
        no_embed_class=True,  # position embeddings for the patches only (DINOv2 with registers)
        num_register_tokens=4,
        use_rel_pos_bias=False,
        use_shared_rel_pos_bias=False,
        layer_scale_init_value=1e-5,  # timm vit_large_patch14_reg4_dinov2 init_values (the checkpoint's replace it)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=4,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]))
