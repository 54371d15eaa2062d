# Mask2Former on ViT-Adapter-L over BEiT-L, COCO-Stuff-10k 512x512, 8 GPUs x 2 images, 40k iterations, from unilm
# beit_large_patch16_224_pt22k_ft22k. Published: 53.2 mIoU single scale, 54.2 multi-scale (czczup/ViT-Adapter
# segmentation/configs/coco_stuff10k/README.md).
_base_ = ['./mask2former_beit-adapter-base_8xb2-40k_coco-stuff10k-512x512.py']
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'
width = 1024
model = dict(
    backbone=dict(
        arch='large',
        drop_path_rate=0.3,
        deform_num_heads=16,
        with_cp=True,
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],
        init_cfg=dict(checkpoint=pretrained)),
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
