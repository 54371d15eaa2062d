# BEiT v2 BEiT-B + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, mixed precision, from the BEiT v2
# checkpoint with 90 epochs of intermediate ImageNet-21k fine-tuning, unilm beitv2_base_patch16_224_pt1k_ft21k.
# Published: 53.5 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K", BEiTv2-base, beitv2_base_patch16_224_pt1k_ft21k).
# Reference: unilm beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_base_12_512_slide_160k_21ktoade20k.py
# (line 50: layer decay 0.85; everything else as upernet_beit_base_12_512_slide_160k_ade20k.py, see the base config)
# and beit2/semantic_segmentation/README.md (--options model.pretrained=...beitv2_base_patch16_224_pt1k_ft21k.pth).
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-base_pt1k-ft21k.pth
_base_ = ['./beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-base_pt1k-ft21k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
optim_wrapper = dict(paramwise_cfg=dict(layer_decay_rate=0.85))
