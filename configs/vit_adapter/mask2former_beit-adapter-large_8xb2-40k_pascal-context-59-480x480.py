# Mask2Former on ViT-Adapter-L over BEiT-L, Pascal Context (59 classes) 480x480, 8 GPUs x 2 images, 40k iterations,
# from the ImageNet-22k fine-tuned BEiT-L (unilm beit_large_patch16_224_pt22k_ft22k; the adapter's own weights
# start at their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-large_pt22k-ft22k.pth
# Published: 67.8 mIoU single scale, 68.2 multi-scale, 568M parameters (czczup/ViT-Adapter segmentation/configs/
# pascal_context/README.md:15). The released segmentor's backbone converts with
#   python tools/convert_checkpoint.py --model vit_adapter --source official SRC DST
# (its head is ViT-Adapter's mmdet 2.x port, whose names differ from mmseg 1.x's Mask2FormerHead: not converted).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line), L = configs/pascal_context/
# mask2former_beit_adapter_large_480_40k_pascal_context_59_ss.py: ViT-Adapter's BEiT-B file of this dataset
# with the BEiT-L adapter and the 1024-wide head of its ADE20K BEiT-L Mask2Former (M = configs/ade20k/
# mask2former_beit_adapter_large_640_160k_ade20k_ss.py; L's lines are M's one later from L:9 on, its img_scale).
# So this config inherits
# mask2former_beit-adapter-base_8xb2-40k_pascal-context-59-480x480.py (data, crop, slide test, schedule, class count)
# and sets what L changes, as mask2former_beit-adapter-large_8xb2-160k_ade20k-640x640.py does on ADE20K.
# Pinned value by value in tests/configs/test_dataset_configs.py.
_base_ = ['./mask2former_beit-adapter-base_8xb2-40k_pascal-context-59-480x480.py']
pretrained = 'checkpoints/beit-large_pt22k-ft22k.pth'  # L:11 (beit_large_patch16_224_pt22k_ft22k)
width = 1024
model = dict(
    backbone=dict(
        arch='large',  # L:18-21; qkv_bias (L:22): BEiT's q/v biases
        layer_scale_init_value=1e-6,  # L:25
        drop_path_rate=0.3,  # L:26
        deform_num_heads=16,  # L:29
        with_cp=True,  # L:32
        interaction_indexes=[[0, 5], [6, 11], [12, 17], [18, 23]],  # L:33
        init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(
        in_channels=[width] * 4,  # L:36
        feat_channels=width,  # L:37
        out_channels=width,  # L:38
        pixel_decoder=dict(
            encoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=width, num_heads=32),  # L:52-53
                                        ffn_cfg=dict(embed_dims=width, feedforward_channels=4096))),  # L:63-64
            positional_encoding=dict(num_feats=width // 2)),  # L:72
        positional_encoding=dict(num_feats=width // 2),  # L:75
        transformer_decoder=dict(layer_cfg=dict(self_attn_cfg=dict(embed_dims=width, num_heads=32),  # L:84-85
                                                cross_attn_cfg=dict(embed_dims=width, num_heads=32),
                                                ffn_cfg=dict(embed_dims=width, feedforward_channels=4096)))))  # L:92
base_lr = 2e-5  # L:138
optim_wrapper = dict(
    optimizer=dict(lr=base_lr),
    paramwise_cfg=dict(layer_decay_rate=0.90))  # L:140 (24 blocks)
