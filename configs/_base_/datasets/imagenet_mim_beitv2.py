# ImageNet-1k without labels for BEiT v2 masked image modeling (unilm beit2/datasets.py DataAugmentationForBEiT with
# the PRETRAINING.md flags): ColorJitter 0.4 and h-flip on the whole image, then ONE random resized crop
# (--min_crop_scale 0.2) resized to 224 bicubic for the backbone and to 224 bicubic (--second_input_size 224
# --second_interpolation bicubic) for the VQ-KD tokenizer, which reads the 0..255 view itself
# (MIMDataPreprocessor target_pixels='raw'); blockwise mask of exactly 75 of the 14x14 patches (--num_mask_patches 75,
# --min_mask_patches_per_block 16, beit2/masking_generator.py min_aspect 0.3 and lines 92-105: the blocks are topped
# up with random patches to the exact count, exact_count=True; v1's rule may mask fewer).
# drop_last=True as unilm (run_beitv2_pretraining.py line 251): 625 steps per epoch at 2048, not 626.
# Layout: data/imagenet/train/<wnid>/*.JPEG (every image below train/ is used; labels are not read).
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
