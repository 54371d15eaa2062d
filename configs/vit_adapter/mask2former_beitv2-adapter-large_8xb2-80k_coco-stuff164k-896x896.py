# Mask2Former on ViT-Adapter-L over BEiT v2-L, COCO-Stuff-164k 896x896, 16 images a step, 80k iterations, from the
# ImageNet-21k fine-tuned BEiT v2-L (unilm beitv2_large_patch16_224_pt1k_ft21k; the adapter's own weights start at
# their init):
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-large_pt1k-ft21k.pth
# Published: 52.3 mIoU single scale (no multi-scale number), 571M parameters (czczup/ViT-Adapter segmentation/configs/
# coco_stuff164k/README.md:15). The released segmentor's backbone (mask2former_beitv2_adapter_large_896_80k_
# cocostuff164k.zip, unzipped) converts with --model vit_adapter --source official (its head does not convert).
#
# Source, czczup/ViT-Adapter@fd64a51 segmentation/configs/coco_stuff164k/
# mask2former_beitv2_adapter_large_896_80k_cocostuff164k_ss.py (V): line for line the BEiT-L file
# (mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py here) but the checkpoint (V:9-10). Pinned in
# tests/configs/test_dataset_configs.py.
_base_ = ['./mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py']
pretrained = 'checkpoints/beitv2-large_pt1k-ft21k.pth'  # V:10 (beitv2_large_patch16_224_pt1k_ft21k)
model = dict(backbone=dict(init_cfg=dict(checkpoint=pretrained)))
