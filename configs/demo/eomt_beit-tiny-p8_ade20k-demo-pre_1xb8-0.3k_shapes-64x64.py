# Fine-tuning a trained EoMT on a new class set (issue 41; the official `--model.ckpt_path X
# --model.load_ckpt_class_head False`, github.com/tue-mps/eomt @ 7bd19dd README "To fine-tune a pre-trained EoMT model",
# training/lightning_module.py:81-98): the EoMT demo model (eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py, 150 ADE20K
# classes, trained on data/ade_demo) fine-tuned on the 'shapes' demo set (7 classes named by outline, raw ids 1..7,
# python tools/make_demo_data.py --dataset shapes). Everything but the class head loads from `load_from`, strictly
# (tools/train.py refuses a file lacking any other weight); the class head is built anew with 7 + 1 outputs and keeps
# its init. The start is the demo run's checkpoint without its class head:
#   python tools/train.py configs/demo/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py
#   python tools/convert_checkpoint.py --model eomt --source beit_mm --drop-class-head \
#       work_dirs/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64/iter_1000.pth checkpoints/eomt-demo_no-class-head.pth
#   python tools/make_demo_data.py --dataset shapes
#   python tools/train.py configs/demo/eomt_beit-tiny-p8_ade20k-demo-pre_1xb8-0.3k_shapes-64x64.py
# HF's trained EoMT weights start the same way (tools/convert_checkpoint.py --model eomt --source hf
# --drop-class-head, with an EoMT config on a DINOv2-style ViT: docs/heads.md). The run is the demo's at 300
# iterations: the same optimizer, a 50-iteration warmup then linear decay, and the whole mask annealing again (the
# official fine-tuning re-runs its schedule; the demo's structure, block j of 2 annealed from (j + 1) U to (j + 2) U,
# with U = 300 x 0.83 / 3 = 83).
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
