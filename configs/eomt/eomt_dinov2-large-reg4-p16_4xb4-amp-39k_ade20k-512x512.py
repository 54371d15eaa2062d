# EoMT on a DINOv2-style ViT-L (patch 16, 4 register tokens, absolute position embeddings for the patches only, layer
# scale, no relative position bias): the official ADE20K semantic configuration, github.com/tue-mps/eomt @ 7bd19dd
# configs/dinov2/ade20k/semantic/eomt_large_512.yaml, and the architecture of HF transformers'
# EomtForUniversalSegmentation (transformers 4.57.6, models/eomt/modeling_eomt.py), whose weights this config holds
# exactly (tests/test_eomt_hf.py: logits within 1e-4 of HF's with the same weights).
# Published: 58.4 mIoU (ADE20K val; tue-mps/eomt model_zoo/dinov2.md:191-196; weights on HF:
# tue-mps/ade20k_semantic_eomt_large_512).
#
# Start: the official ADE20K weights, converted from the HF folder (tue-mps/ade20k_semantic_eomt_large_512):
#   python tools/convert_checkpoint.py --model eomt --source hf model.safetensors checkpoints/eomt-large-512_ade20k.pth
#   python tools/test.py configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py \
#       checkpoints/eomt-large-512_ade20k.pth
# Training from the DINOv2 ImageNet-22k backbone as the official run does (timm vit_large_patch14_reg4_dinov2 with its
# 14-px patch embedding resampled to 16 px, models/vit.py:33-39) needs a DINOv2 converter beit_mm does not have yet;
# `load_from` below starts from the converted EoMT weights instead (fine-tuning them), never from random weights.
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
        layer_scale_init_value=1.0,  # DINOv2 / HF EomtConfig.layerscale_value (the checkpoint's lambdas replace it)
        init_cfg=None),  # the whole segmentor comes from load_from
    num_blocks=4,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]))
pretrained = None  # the BEiT-B config's backbone file is not used here
load_from = 'checkpoints/eomt-large-512_ade20k.pth'
