# BEiT v2 BEiT-B/16 fine-tuned on ImageNet-1k from its 300-epoch VQ-KD pretraining, 100 epochs, 8 GPUs x 128, AMP.
# Published: 85.0 top-1 (unilm beit2/get_started_for_image_classification.md, beitv2_base_patch16_224_pt1k_300e_ft1k).
# Source: microsoft/unilm@768a3c87 beit2/get_started_for_image_classification.md; the rest as the 1600-epoch config.
#   python tools/convert_checkpoint.py --model beit --source unilm beitv2_base_patch16_224_pt1k_300e.pth \
#       checkpoints/beitv2-base_pt1k-300e.pth
_base_ = ['./beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py']
pretrained = 'checkpoints/beitv2-base_pt1k-300e.pth'
model = dict(backbone=dict(drop_path_rate=0.1, init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
optim_wrapper = dict(paramwise_cfg=dict(layer_decay_rate=0.65))
