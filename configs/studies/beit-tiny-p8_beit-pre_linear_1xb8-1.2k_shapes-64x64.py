# MIM study, stage 3 with a linear decoder (tools/analysis/mim_study.py --heads linear, the default): the study's
# UPerNet fine-tuning config (beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py: same backbone, data, optimizer,
# layer decay, schedule, 1200 iterations at batch 8) with the neck and both heads replaced by one 1x1 convolution on
# the last block's 8x8 patch tokens (mmseg's FCNHead with num_convs=0: dropout 0.1, then the 1x1 classifier), upsampled
# bilinearly to the 64x64 label map. Every spatial reasoning step is then the backbone's: UPerNet's 3x3 convolutions
# over a 4-level pyramid can learn the shapes from the labels on their own and hide what the backbone brings.
#   python tools/train.py configs/studies/beit-tiny-p8_beit-pre_linear_1xb8-1.2k_shapes-64x64.py \
#       --cfg-options model.backbone.init_cfg.checkpoint=work_dirs/mim_study/mim/tokens-blockwise_seed0/iter_3000.pth
_base_ = ['./beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py']
model = dict(
    backbone=dict(out_indices=(5, )),
    neck=None,
    decode_head=dict(
        _delete_=True,
        type='FCNHead',
        in_channels={{_base_.embed_dims}},
        in_index=0,
        channels={{_base_.embed_dims}},
        num_convs=0,
        concat_input=False,
        dropout_ratio=0.1,
        num_classes={{_base_.num_classes}},
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
