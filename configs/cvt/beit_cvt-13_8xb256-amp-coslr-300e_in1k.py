# CvT-13 masked image modeling on ImageNet-1k with BEiT's recipe (DALL-E tokens at 112 px, blockwise mask of 75 of the
# 14x14 patches), 300 epochs, 8 GPUs x 256, AMP; design note docs/cvt_mim.md. Published: none.
#   python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl checkpoints/dalle_encoder.pth
#   bash tools/dist_train.sh configs/cvt/beit_cvt-13_8xb256-amp-coslr-300e_in1k.py 8
# The checkpoints keep the backbone under `backbone.`: fine-tune with beit_mm.CvT(init_cfg=dict(type='Pretrained',
#   checkpoint='work_dirs/beit_cvt-13_8xb256-amp-coslr-300e_in1k/epoch_300.pth', prefix='backbone.'))
_base_ = ['../beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py']
tokenizer_checkpoint = 'checkpoints/dalle_encoder.pth'

model = dict(
    _delete_=True,
    type='beit_mm.BEiTPretrain',
    data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], to_rgb=True),
    backbone=dict(
        type='beit_mm.CvT',
        arch='cvt-13',
        drop_path_rate=(0.0, 0.0, 0.1),
        out_type='featmap',
        out_indices=(2, ),
        final_norm=True,
        with_mask_token=True),
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=384, vocab_size=8192),
    target_generator=dict(type='beit_mm.DALLEEncoder', autocast_dtype='bfloat16',
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)),
    zero_masked_pixels=True)
