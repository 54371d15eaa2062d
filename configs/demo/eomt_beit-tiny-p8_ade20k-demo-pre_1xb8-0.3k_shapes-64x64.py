# Fine-tuning a trained EoMT on a new class set (the official `--model.load_ckpt_class_head False`): the EoMT demo model
# (eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py, 150 classes) on the 7-class 'shapes' demo set, 300 iterations.
# Everything but the class head loads strictly from `load_from`; the class head is built anew with 7 + 1 outputs.
#   python tools/train.py configs/demo/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py
#   python tools/convert_checkpoint.py --model eomt --source beit_mm --drop-class-head \
#       work_dirs/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64/iter_1000.pth checkpoints/eomt-demo_no-class-head.pth
#   python tools/make_demo_data.py --dataset shapes
#   python tools/train.py configs/demo/eomt_beit-tiny-p8_ade20k-demo-pre_1xb8-0.3k_shapes-64x64.py
_base_ = ['./eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py']
load_from = 'checkpoints/eomt-demo_no-class-head.pth'
data_root = 'data/shapes'
num_classes = 7
class_names = ('wall', 'building', 'sky', 'floor', 'tree', 'ceiling', 'road')
model = dict(num_classes=num_classes, mask_annealing=dict(start_steps=[83, 166], end_steps=[166, 249]))
dataset = dict(data_root=data_root, metainfo=dict(classes=class_names))
train_dataloader = dict(dataset=dataset)
val_dataloader = dict(dataset=dataset)
test_dataloader = val_dataloader
max_iters = 300
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=50, end=max_iters),
]
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(checkpoint=dict(interval=max_iters))
