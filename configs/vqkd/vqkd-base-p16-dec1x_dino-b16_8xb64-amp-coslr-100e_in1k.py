# unilm `vqkd_encoder_base_decoder_1x768x12_dino`: the 1x recipe distilled from DINO ViT-B/16.
#   python tools/convert_checkpoint.py --model dino --source official dino_vitbase16_pretrain.pth \
#       checkpoints/dino_vitb16.pth
_base_ = ['./vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py']
dino_checkpoint = 'checkpoints/dino_vitb16.pth'
model = dict(
    arch='base_decoder_1x_dino',
    teacher=dict(
        _delete_=True,
        type='beit_mm.BackboneTeacher',
        backbone=dict(type='beit_mm.BEiT', arch='base', img_size=224, patch_size=16, use_abs_pos_emb=True,
                      use_rel_pos_bias=False, layer_scale_init_value=0.0, drop_path_rate=0.0, final_norm=True,
                      init_cfg=dict(type='Pretrained', checkpoint=dino_checkpoint)),
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)))
