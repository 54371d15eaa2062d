# CvT-21 + UPerNet, ADE20K 512x512, 8 GPUs x 2 images, 160k iterations, from the ImageNet-1k CvT-21 checkpoint; the
# recipe of the CvT-13 config.
#   python tools/convert_checkpoint.py --model cvt --source official CvT-21-224x224-IN-1k.pth \
#       checkpoints/cvt-21_in1k.pth
_base_ = ['./cvt-13_upernet_8xb2-160k_ade20k-512x512.py']
pretrained = 'checkpoints/cvt-21_in1k.pth'
model = dict(backbone=dict(arch='cvt-21', drop_path_rate=(0.0, 0.0, 0.1), init_cfg=dict(type='Pretrained', checkpoint=pretrained)))
