# Mask2Former on ViT-Adapter-B over BEiT-B, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the ImageNet-22k
# fine-tuned BEiT-B (unilm beit_base_patch16_224_pt22k_ft22k, the file ViT-Adapter's BEiT-B configs start from, C:10;
# the adapter's own weights start at their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
# Published: none for ADE20K. ViT-Adapter publishes its BEiT-B adapter with Mask2Former on COCO-Stuff-10k (50.0 mIoU
# single scale / 50.5 multi-scale, 512, 40k; segmentation/README.md:81) and Pascal Context 59 (64.0 / 64.4, 480, 40k;
# segmentation/README.md:97), and on ADE20K only BEiT-L (58.3 / 59.0, 640, 160k; segmentation/README.md:67,
# mask2former_beit-adapter-large_8xb2-160k_ade20k-640x640.py here). This config is the closest recipe to those: the
# ADE20K BEiT-L recipe (M) for data, crop and schedule with the BEiT-B values of C.
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line):
# - C = configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py, ViT-Adapter's BEiT-B
#   Mask2Former (configs/pascal_context/mask2former_beit_adapter_base_480_40k_pascal_context_59_ss.py has the same
#   backbone at lines 17-32 and optimizer at 135-137): the BEiT-B adapter sizes (C:17-31), drop path 0.2 (C:25),
#   lr 3e-5 (C:134), layer decay 0.95 over 12 blocks (C:136), the 256-wide head (C:35-36); no with_cp in C, so the
#   official default with_cp=False (mmseg_custom/models/backbones/beit_adapter.py:25);
# - M = configs/ade20k/mask2former_beit_adapter_large_640_160k_ade20k_ss.py: crop 640, data, slide test, warmup and
#   poly schedule, batch per GPU, weight decay 0.05 (= C:134).
# That is the recipe of configs/mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py (its A = M here), which
# this config inherits: the same head, data, schedule, lr and layer decay; only the backbone changes (BEiTAdapter
# instead of BEiT + Feature2Pyramid). Differences from ViT-Adapter's runs as that config's header says (the head's
# queries and embeddings at layer 0 in ViT-Adapter's constructor, at L + 1 here; mmdet 3.3.0's head).
# Parameters: 120.6M (120.2M at C's 512, where ViT-Adapter's segmentation/README.md:81 counts 120M; tested).
# Pinned value by value in tests/configs/test_vit_adapter_configs.py.
_base_ = ['../mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py']
crop_size = (640, 640)  # M:8
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'  # C:10 (beit_base_patch16_224_pt22k_ft22k)
model = dict(
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='base',  # C:17-20: 768 wide, 12 blocks, 12 heads, mlp ratio 4; qkv_bias (C:21): BEiT's q/v biases
        img_size=640,  # M:15 (C:15 is its 512 crop)
        patch_size=16,  # C:16
        use_abs_pos_emb=False,  # C:22
        use_rel_pos_bias=True,  # C:23
        layer_scale_init_value=1e-6,  # C:24 init_values (the checkpoint's gammas replace the blocks')
        drop_path_rate=0.2,  # C:25
        conv_inplane=64,  # C:26
        n_points=4,  # C:27
        deform_num_heads=12,  # C:28
        cffn_ratio=0.25,  # C:29
        deform_ratio=0.5,  # C:30
        with_cp=False,  # none in C: beit_adapter.py:25 default
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],  # C:31
        norm_cfg=dict(type='SyncBN', requires_grad=True),  # beit_adapter.py:51-54, adapter_modules.py:242
        # the BEiT checkpoint has no adapter weights: they keep their init (beit_adapter.ADAPTER_WEIGHTS)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,  # the adapter gives the 4 levels itself
    decode_head=dict(in_channels=[768] * 4))  # C:34; the 256-wide head (C:35-36) as the base config
