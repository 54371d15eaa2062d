# EoMT on a DINOv2-style ViT-L/16 with 4 registers, ADE20K semantic 512x512, the official recipe; its weights are those
# of HF transformers' EomtForUniversalSegmentation. Published: 58.4 mIoU (ADE20K val; tue-mps/eomt model_zoo/dinov2.md).
# Source: tue-mps/eomt@7bd19dd configs/dinov2/ade20k/semantic/eomt_large_512.yaml.
#   python tools/convert_checkpoint.py --model dinov2 --source timm --img-size 512 --patch-size 16 \
#       vit_large_patch14_reg4_dinov2.lvd142m.safetensors checkpoints/dinov2-large-reg4_p16-512.pth
#   python tools/convert_checkpoint.py --model eomt --source hf model.safetensors checkpoints/eomt-large-512_ade20k.pth
#   python tools/test.py configs/eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py \
#       checkpoints/eomt-large-512_ade20k.pth
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
pretrained = 'checkpoints/dinov2-large-reg4_p16-512.pth'
model = dict(
    backbone=dict(
        arch='large',
        img_size=512,
        patch_size=16,
        use_abs_pos_emb=True,
        no_embed_class=True,
        num_register_tokens=4,
        use_rel_pos_bias=False,
        use_shared_rel_pos_bias=False,
        layer_scale_init_value=1e-5,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=4,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]))
