# Mask2Former on ViT-Adapter-L over BEiT v2-L, COCO-Stuff-164k 896x896, 16 images a step, 80k iterations, from the
# ImageNet-21k fine-tuned BEiT v2-L (unilm beitv2_large_patch16_224_pt1k_ft21k; the adapter's own weights start at
# their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-large_pt1k-ft21k.pth
# Published: 52.3 mIoU single scale (no multi-scale number), 571M parameters (czczup/ViT-Adapter segmentation/configs/
# coco_stuff164k/README.md:15). The released segmentor's backbone (mask2former_beitv2_adapter_large_896_80k_
# cocostuff164k.zip, unzipped) converts with --model vit_adapter --source official (its head does not convert).
_base_ = ['./mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py']
pretrained = 'checkpoints/beitv2-large_pt1k-ft21k.pth'
model = dict(backbone=dict(init_cfg=dict(checkpoint=pretrained)))
