# Mask2Former on ViT-Adapter-L over BEiT-L, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the
# ImageNet-22k fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights start at their
# init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 58.3 mIoU single scale, 59.0 multi-scale (czczup/ViT-Adapter segmentation/configs/ade20k/README.md:40).
# The released segmentor's backbone converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official SRC DST
# (its head is ViT-Adapter's mmdet 2.x port, whose names differ from mmseg 1.x's Mask2FormerHead: not converted).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), M = configs/ade20k/
# mask2former_beit_adapter_large_640_160k_ade20k_ss.py. The head's structure and loss are
# configs/_base_/models/mask2former_beit.py (ViT-Adapter's _base_/models/mask2former_beit.py, line by line), widened
# here to M's 1024 channels. Differences as in configs/mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py
# (the head's queries and embeddings at layer 0 in ViT-Adapter's constructor, at L + 1 here; mmdet 3.3.0's head).
# Pinned value by value in tests/configs/test_vit_adapter_configs.py.
_base_ = ['../mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py']
crop_size = (640, 640)  # M:8
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'  # M:10 (beit_large_patch16_224_pt22k_ft22k)
width = 1024
model = dict(
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='large',  # M:17-20; qkv_bias (M:21): BEiT's q/v biases
        img_size=640,  # M:15
        patch_size=16,  # M:16
        use_abs_pos_emb=False,  # M:22
        use_rel_pos_bias=True,  # M:23
        layer_scale_init_value=1e-6,  # M:24
        drop_path_rate=0.3,  # M:25
        conv_inplane=64,  # M:26
        n_points=4,  # M:27
        deform_num_heads=16,  # M:28
        cffn_ratio=0.25,  # M:29
        deform_ratio=0.5,  # M:30
        with_cp=True,  # M:31
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],  # M:32
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(
        in_channels=[width] * 4,  # M:35
        feat_channels=width,  # M:36
        out_channels=width,  # M:37
        pixel_decoder=dict(
            encoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=width, num_heads=32),  # M:51-52
                                        ffn_cfg=dict(embed_dims=width, feedforward_channels=4096))),  # M:62-63
            positional_encoding=dict(num_feats=width // 2)),  # M:71
        positional_encoding=dict(num_feats=width // 2),  # M:74
        transformer_decoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=width, num_heads=32),  # M:83-84
                                                cross_attn_cfg=dict(embed_dims=width, num_heads=32),
                                                ffn_cfg=dict(embed_dims=width, feedforward_channels=4096)))))  # M:91
base_lr = 2e-5  # M:137
optim_wrapper = dict(
    optimizer=dict(lr=base_lr),
    paramwise_cfg=dict(layer_decay_rate=0.90))  # M:139 (24 blocks)
