# ImageNet-1k without labels for BEiT v2 masked image modeling (unilm beit2/datasets.py with the PRETRAINING.md flags):
# one random resized crop (scale 0.2-1) to 224 for the backbone and the VQ-KD tokenizer, exactly 75 of 14x14 masked.
# Layout: data/imagenet/train/<wnid>/*.JPEG (labels are not read).
_base_ = ['./pipelines/beitv2-mim_exact.py', './pipelines/beitv2-mim_draft.py', './pipelines/beitv2-mim_gpu-decode.py']
data_root = 'data/imagenet/'
train_dataloader = dict(
    batch_size=256,
    num_workers=7,
    pin_memory=True,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='train', with_label=False,
                 pipeline={{_base_.train_pipeline}}))
