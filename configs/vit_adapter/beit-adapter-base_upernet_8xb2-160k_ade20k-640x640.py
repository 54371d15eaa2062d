# ViT-Adapter-B on BEiT-B + UPerNet, ADE20K 640x640: the BEiT-L recipe with the BEiT-B sizes of ViT-Adapter's BEiT-B
# Mask2Former configs, from unilm beit_base_patch16_224_pt22k_ft22k. Published: none (ViT-Adapter publishes no UPerNet
# run of its BEiT-B adapter).
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
_base_ = ['./beit-adapter-large_upernet_8xb2-160k_ade20k-640x640.py']
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'
width = 768
model = dict(
    backbone=dict(
        arch='base',
        drop_path_rate=0.2,
        deform_num_heads=12,
        with_cp=False,
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],
        init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(in_channels=[width] * 4, channels=width),
    auxiliary_head=dict(in_channels=width))
base_lr = 3e-5
optim_wrapper = dict(
    optimizer=dict(lr=base_lr),
    paramwise_cfg=dict(layer_decay_rate=0.95))
