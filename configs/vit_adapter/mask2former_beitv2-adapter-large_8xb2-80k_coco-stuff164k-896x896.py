# Mask2Former on ViT-Adapter-L over BEiT v2-L, COCO-Stuff-164k 896x896, 16 images a step, 80k iterations, from unilm
# beitv2_large_patch16_224_pt1k_ft21k. Published: 52.3 mIoU single scale (czczup/ViT-Adapter segmentation/configs/
# coco_stuff164k/README.md).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-large_pt1k-ft21k.pth
_base_ = ['./mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py']
pretrained = 'checkpoints/beitv2-large_pt1k-ft21k.pth'
model = dict(backbone=dict(init_cfg=dict(checkpoint=pretrained)))
