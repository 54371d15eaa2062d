# CvT-21 on ImageNet-1k from scratch, 224x224, 8 GPUs x 256 = total batch 2048, lr 2e-3, 300 epochs; paper: 82.5
# top-1. Same recipe as CvT-13 (microsoft/CvT cvt-21-224x224.yaml differs in the depths), drop path 0.1.
_base_ = ['./cvt-13_8xb256-300e_in1k.py']
model = dict(backbone=dict(arch='cvt-21', drop_path_rate=0.1))
