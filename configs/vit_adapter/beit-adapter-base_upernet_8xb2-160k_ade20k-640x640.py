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
