# Mask2Former on ViT-Adapter-L over BEiT-L, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from unilm
# beit_large_patch16_224_pt22k_ft22k. Published: 58.3 mIoU single scale, 59.0 multi-scale (czczup/ViT-Adapter
# segmentation/configs/ade20k/README.md).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# The released segmentor's backbone converts (its mmdet 2.x head does not) with
#   python tools/convert_checkpoint.py --model vit_adapter --source official SRC DST
_base_ = ['../mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py']
crop_size = (640, 640)
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
width = 1024
model = dict(
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',
        img_size=640,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.3,
        conv_inplane=64,
        n_points=4,
        deform_num_heads=16,
        cffn_ratio=0.25,
        deform_ratio=0.5,
        with_cp=True,
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,
    decode_head=dict(
        in_channels=[width] * 4,
        feat_channels=width,
        out_channels=width,
        pixel_decoder=dict(
            encoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=width, num_heads=32),
                                        ffn_cfg=dict(embed_dims=width, feedforward_channels=4096))),
            positional_encoding=dict(num_feats=width // 2)),
        positional_encoding=dict(num_feats=width // 2),
        transformer_decoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=width, num_heads=32),
                                                cross_attn_cfg=dict(embed_dims=width, num_heads=32),
                                                ffn_cfg=dict(embed_dims=width, feedforward_channels=4096)))))
base_lr = 2e-5
optim_wrapper = dict(
    optimizer=dict(lr=base_lr),
    paramwise_cfg=dict(layer_decay_rate=0.90))
