# BEiT v2 BEiT-L + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, AMP, from the ImageNet-21k intermediate
# fine-tuned checkpoint unilm beitv2_large_patch16_224_pt1k_ft21k.
# Published: 57.5 mIoU (unilm beit2/README.md "Fine-tuning on ADE20K").
# Source: microsoft/unilm@768a3c87
# beit2/semantic_segmentation/configs/beit/upernet/upernet_beit_large_24_512_slide_160k_21ktoade20k.py.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_large_patch16_224_pt1k_ft21k.pth \
#       checkpoints/beitv2-large_pt1k-ft21k.pth
_base_ = ['./beitv2-large_upernet_8xb2-amp-160k_ade20k-512x512.py']
pretrained = 'checkpoints/beitv2-large_pt1k-ft21k.pth'
model = dict(backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
base_lr = 3e-5
optim_wrapper = dict(optimizer=dict(lr=base_lr))
