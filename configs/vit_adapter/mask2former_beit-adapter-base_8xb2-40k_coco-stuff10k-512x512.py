# Mask2Former on ViT-Adapter-B over BEiT-B, COCO-Stuff-10k 512x512, 8 GPUs x 2 images, 40k iterations, from unilm
# beit_base_patch16_224_pt22k_ft22k. Published: 50.0 mIoU single scale, 50.5 multi-scale (czczup/ViT-Adapter
# segmentation/configs/coco_stuff10k/README.md).
# Source: czczup/ViT-Adapter@fd64a51
# segmentation/configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
_base_ = ['../_base_/models/mask2former_beit-adapter-base.py', '../_base_/datasets/coco-stuff10k.py']
crop_size = (512, 512)
scale = (2048, 512)
num_classes = 171
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=scale, keep_ratio=True),
    dict(type='ResizeToMultiple', size_divisor=32),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
val_dataloader = dict(batch_size=1, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
