# EoMT on BEiT-L, ADE20K semantic segmentation 640x640, 4 GPUs x 4 images (16), 39153 iterations (31 epochs), mixed
# precision, from the self-supervised (MIM, pretrained-only) ImageNet-22k checkpoint unilm beit_large_patch16_224_pt22k:
# the shared relative position bias is copied into every block and resampled from 14x14 to 40x40 on load, and the
# file's final norm is the norm EoMT predicts from. (The UPerNet BEiT-L config starts from the ImageNet-22k fine-tuned
# file, which has no final norm, only the mean-pooling fc_norm; EoMT's official backbones are self-supervised only.)
# Published: none. EoMT's published runs use DINOv2/DINOv3 backbones; no BEiT + EoMT number was found.
#
# Official values (github.com/tue-mps/eomt @ 7bd19dd), as the BEiT-B config (eomt_beit-base_4xb4-amp-39k_ade20k-
# 512x512.py, whose header lists every source and every difference from the official runs) except:
# - L2 = 4 blocks with queries: the ViT-L default (models/eomt.py:24), used by the ADE20K semantic ViT-L config
#   (configs/dinov2/ade20k/semantic/eomt_large_512.yaml, which sets no num_blocks);
# - mask annealing as that config, poly 0.9: starts 6520, 13040, 19560, 26080; ends 13040, 19560, 26080, 32600
#   (eomt_large_512.yaml:13-14; same dataset, batch and 31 epochs, so the same steps);
# - crop 640 (beit_mm's choice, the crop of the BEiT-L UPerNet recipe, configs/beit/beit-large_upernet_8xb1-amp-160k_
#   ade20k-640x640.py; the official ADE20K semantic config trains at 512, datasets/ade20k_semantic.py:24): scale jitter
#   of the image fitted into 640x640, random crop 640, test shorter side 640 and 640-px windows
#   (training/lightning_module.py:601-665 with img_size 640);
# unchanged: 100 queries (eomt_large_512.yaml:18), AdamW lr 1e-4, wd 0.05 on every parameter, llrd 0.8, warmup
# (500, 1000) + poly 0.9 (training/mask_classification_semantic.py:25-34), clip 0.01 (main.py:176-177), 31 epochs of
# 1263 steps (eomt_large_512.yaml:2), loss 2/5/5/0.1 with 12544 points (mask_classification_semantic.py:30-38).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_large_patch16_224_pt22k.pth \
#       checkpoints/beit-large_pt22k.pth
_base_ = ['./eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py']
crop_size = (640, 640)
pretrained = 'checkpoints/beit-large_pt22k.pth'
model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch='large',
        img_size=640,
        layer_scale_init_value=1e-5,  # BEiT-L pretraining's value (the checkpoint's gammas replace it)
        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),
    num_blocks=4,
    mask_annealing=dict(start_steps=[6520, 13040, 19560, 26080], end_steps=[13040, 19560, 26080, 32600]),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=crop_size))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=crop_size, ratio_range=(0.5, 2.0), keep_ratio=True, backend='pillow'),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=1.0),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion', brightness_delta=32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5),
         hue_delta=9),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2560, 640), keep_ratio=True, backend='pillow'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
