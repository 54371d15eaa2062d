# CvT-13 masked image modeling on ImageNet-1k (BEiT's recipe, beit_mm.BEiTPretrain with a CvT backbone; design note docs/cvt_mim.md):
# 300 epochs, 8 GPUs x 256 = 2048 images/step, AMP, AdamW lr 1.5e-3, warmup 10, cosine to 1e-5, clip 3.0;
# 224 px backbone view / 112 px DALL-E tokenizer view (14x14 ids), blockwise mask of 75 of the 14x14 16 px patches,
# upsampled x4 to the 56x56 stage-0 tokens (mask token there), predicted from the 14x14 stage-2 map.
#   python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl checkpoints/dalle_encoder.pth
#   bash tools/dist_train.sh configs/cvt/beit_cvt-13_8xb256-amp-coslr-300e_in1k.py 8
# The checkpoints keep the backbone under `backbone.`: fine-tune with beit_mm.CvT(init_cfg=dict(type='Pretrained',
#   checkpoint='work_dirs/beit_cvt-13_8xb256-amp-coslr-300e_in1k/epoch_300.pth', prefix='backbone.'))
_base_ = ['../beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py']
tokenizer_checkpoint = 'checkpoints/dalle_encoder.pth'

model = dict(
    _delete_=True,
    type='beit_mm.BEiTPretrain',
    # ImageNet mean/std: unilm's ImageNet-1k pretraining (--imagenet_default_mean_and_std) and the CvT fine-tuning
    # configs (cvt-13_8xb256-300e_in1k.py, cvt-13_upernet_8xb2-160k_ade20k-512x512.py) normalize the same way
    data_preprocessor=dict(type='beit_mm.MIMDataPreprocessor', mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], to_rgb=True),
    backbone=dict(
        type='beit_mm.CvT',
        arch='cvt-13',
        drop_path_rate=(0.0, 0.0, 0.1),  # per stage, CvT-13's ImageNet value
        out_type='featmap',
        out_indices=(2, ),
        final_norm=True,
        with_mask_token=True),
    head=dict(type='beit_mm.BEiTMIMHead', embed_dims=384, vocab_size=8192),
    # The ids in bf16 (input conv and groups; the output conv in fp32): unilm tokenizes with the released dall_e
    # encoder (beit/modeling_discrete_vae.py lines 203-227), whose convs run in fp16 on CUDA (dall-e 0.1
    # dall_e/utils.py lines 32-36; not the output conv, encoder.py line 81). bf16 ids agree with fp32 on 99.5% of the
    # tokens (real-size encoder, random weights: docs/studies/tokenizer-precision.md), above the 99% the configs ask.
    target_generator=dict(type='beit_mm.DALLEEncoder', autocast_dtype='bfloat16',
                          init_cfg=dict(type='Pretrained', checkpoint=tokenizer_checkpoint)),
    zero_masked_pixels=True)
# CvT MIM compiles whole too (tests/models/test_compile_models.py), with the BEiT MIM setting inherited
