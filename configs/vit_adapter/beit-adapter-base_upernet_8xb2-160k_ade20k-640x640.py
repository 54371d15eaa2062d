# ViT-Adapter-B on BEiT-B + UPerNet, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations, from the ImageNet-22k
# fine-tuned BEiT-B (unilm beit_base_patch16_224_pt22k_ft22k, the file ViT-Adapter's BEiT-B configs start from, C:10;
# the adapter's own weights start at their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
# Published: none for ADE20K. ViT-Adapter publishes no UPerNet run of its BEiT-B adapter on any dataset; its BEiT-B
# adapter runs are Mask2Former on COCO-Stuff-10k (50.0 mIoU ss / 50.5 ms, segmentation/README.md:81) and Pascal
# Context 59 (64.0 / 64.4, segmentation/README.md:97); on ADE20K its UPerNet BEiT run is BEiT-L (58.0 / 58.4, 640,
# 160k; segmentation/README.md:66, beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py here) and its UPerNet B
# runs are ViT-Adapter-B on DeiT-B (48.8 / 49.7, 512; segmentation/README.md:61) and AugReg-B (51.9 / 52.5, 512;
# segmentation/README.md:63).
#
# The recipe: ViT-Adapter's ADE20K UPerNet BEiT-L recipe (U) with the BEiT-B values of C, at 640, not the ViT-B
# adapter UPerNet recipe (D, 512). Why: D's values are tuned for a different backbone and checkpoint (DeiT-B from
# ImageNet-1k, absolute position embeddings, no layer scale: lr 6e-5, weight decay 0.01, drop path 0.3, fp16; D:18,
# 49, 64), while this model is BEiT with its relative position bias and layer scale from the same pt22k_ft22k file
# as C, and every ViT-Adapter BEiT recipe on ADE20K trains at 640 (U:8, M:8). It also keeps both BEiT-B adapter
# configs here and the plain BEiT-B baselines (configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py,
# configs/mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py) on one crop, schedule and checkpoint.
#
# Sources, czczup/ViT-Adapter@fd64a51 segmentation/ (path:line):
# - U = configs/ade20k/upernet_beit_adapter_large_640_160k_ade20k_ss.py; its _base_ (U:2-7): _base_/models/
#   upernet_beit.py (UPerHead, FCN auxiliary head on level 2, 256 channels, weight 0.4) and _base_/schedules/
#   schedule_160k.py (S: 160k iterations): crop, data, slide test, warmup and poly schedule, weight decay, batch;
# - C = configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py: the BEiT-B adapter sizes
#   (C:17-31), drop path 0.2 (C:25), lr 3e-5 (C:134), layer decay 0.95 over 12 blocks (C:136); no with_cp in C, so
#   the official default with_cp=False (mmseg_custom/models/backbones/beit_adapter.py:25);
# - D = configs/ade20k/upernet_deit_adapter_base_512_160k_ade20k.py (not used; see above).
# The head's widths: U sets UPerHead's in_channels and channels to the ViT width (U:35-37, 1024 for BEiT-L) and the
# auxiliary head's input to it (U:40); at BEiT-B's width that is 768, as unilm's BEiT-B UPerNet at 640
# (microsoft/unilm@768a3c87 beit/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_640_slide_160k_
# ade20k_pt2ft.py:37-42) and configs/beit/ here (D's head, upernet_r50.py:22, is 512 wide).
# Everything U sets and C does not (crop, data, slide test, warmup and poly schedule, weight decay, batch, iterations,
# checkpoints) is inherited from the BEiT-L config of U, beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py.
# Pinned value by value in tests/configs/test_vit_adapter_configs.py.
_base_ = ['./beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py']
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'  # C:10 (beit_base_patch16_224_pt22k_ft22k)
width = 768  # C:17
model = dict(
    backbone=dict(
        arch='base',  # C:17-20: 768 wide, 12 blocks, 12 heads, mlp ratio 4; qkv_bias (C:21): BEiT's q/v biases
        # img_size 640 (U:15; C:15 is its 512 crop), patch 16, no absolute position embedding, relative position bias,
        # layer scale 1e-6, conv_inplane 64, n_points 4, cffn 0.25, deform_ratio 0.5: C:16, 22-24, 26-27, 29-30 =
        # U's values, inherited
        drop_path_rate=0.2,  # C:25
        deform_num_heads=12,  # C:28
        with_cp=False,  # none in C: beit_adapter.py:25 default
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],  # C:31
        init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(in_channels=[width] * 4, channels=width),  # U:35-37 at BEiT-B's width
    auxiliary_head=dict(in_channels=width))  # U:40-41 (its 256 channels: upernet_beit.py:44)
base_lr = 3e-5  # C:134 (U:75 has BEiT-L's 2e-5)
optim_wrapper = dict(
    optimizer=dict(lr=base_lr),  # C:134; betas, weight decay 0.05: C:134 = U:75
    # layer decay 0.95 over 12 blocks (C:135-136; U:77 has BEiT-L's 0.90); the weight-decay rule and the adapter's
    # full lr: as the BEiT-L config
    paramwise_cfg=dict(layer_decay_rate=0.95))
