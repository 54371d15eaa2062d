# ImageNet-1k without labels for BEiT masked image modeling (unilm beit/datasets.py DataAugmentationForBEiT):
# ColorJitter 0.4 and h-flip on the whole image, then ONE random resized crop (scale 0.08-1) resized to 224 (bicubic,
# backbone) and 112 (lanczos, DALL-E tokenizer), blockwise mask of 75 of the 14x14 patches.
# Layout: data/imagenet/train/<wnid>/*.JPEG (every image below train/ is used; labels are not read).
_base_ = ['./pipelines/beit-mim_exact.py', './pipelines/beit-mim_draft.py', './pipelines/beit-mim_gpu-decode.py']
data_root = 'data/imagenet/'
train_dataloader = dict(
    batch_size=256,
    num_workers=13,
    pin_memory=True,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, data_prefix='train', with_label=False,
                 pipeline={{_base_.train_pipeline}}))
