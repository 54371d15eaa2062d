# MIM study, stage 3 with Mask2Former (tools/analysis/mim_study.py --heads mask2former): the study's UPerNet
# fine-tuning config (beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py: same backbone and blocks (1, 2, 3, 5),
# pyramid neck, init, data, optimizer, layer decay, schedule, 1200 iterations at batch 8) with UPerHead and the FCN
# auxiliary head replaced by mmseg 1.2.2's Mask2FormerHead (mmdet 3.3.0 inside), as the demo
# (configs/demo/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py): the full-size structure and loss of
# configs/_base_/models/mask2former_beit.py (100 queries, 6 deformable encoder layers over 3 levels, 9 decoder layers,
# loss 2/5/5 with no-object 0.1; sources cited there) narrowed to 64 channels in 4 heads, 196 sampled points (12544 on
# a 512 crop's 128x128 mask logits, scaled to 16x16). The no-object class weight follows the class count:
# mim_study.py --num-classes K sets num_classes and class_weight ([1.0] * K + [0.1]).
#   python tools/train.py configs/studies/beit-tiny-p8_beit-pre_mask2former_1xb8-1.2k_shapes-64x64.py \
#       --cfg-options model.backbone.init_cfg.checkpoint=work_dirs/mim_study/mim/tokens-blockwise_seed0/iter_3000.pth
_base_ = ['./beit-tiny-p8_beit-pre_upernet_1xb8-1.2k_shapes-64x64.py']
custom_imports = dict(imports=['beit_mm', 'mmdet.models'], allow_failed_imports=False)
head_dims = 64
model = dict(
    auxiliary_head=None,
    decode_head=dict(
        _delete_=True,
        type='Mask2FormerHead',
        in_channels=[{{_base_.embed_dims}}] * 4,
        strides=[4, 8, 16, 32],
        feat_channels=head_dims,
        out_channels=head_dims,
        num_classes={{_base_.num_classes}},
        num_queries=100,
        num_transformer_feat_level=3,
        align_corners=False,
        pixel_decoder=dict(
            type='beit_mm.PortableMSDeformAttnPixelDecoder',
            num_outs=3,
            norm_cfg=dict(type='GN', num_groups=32),
            act_cfg=dict(type='ReLU'),
            encoder=dict(
                num_layers=6,
                layer_cfg=dict(
                    self_attn_cfg=dict(embed_dims=head_dims, num_heads=4, num_levels=3, num_points=4, im2col_step=64,
                                       dropout=0.0, batch_first=True, norm_cfg=None, init_cfg=None),
                    ffn_cfg=dict(embed_dims=head_dims, feedforward_channels=4 * head_dims, num_fcs=2, ffn_drop=0.0,
                                 act_cfg=dict(type='ReLU', inplace=True))),
                init_cfg=None),
            positional_encoding=dict(num_feats=head_dims // 2, normalize=True),
            init_cfg=None),
        enforce_decoder_input_project=False,
        positional_encoding=dict(num_feats=head_dims // 2, normalize=True),
        transformer_decoder=dict(
            return_intermediate=True,
            num_layers=9,
            layer_cfg=dict(
                self_attn_cfg=dict(embed_dims=head_dims, num_heads=4, attn_drop=0.0, proj_drop=0.0,
                                   dropout_layer=None, batch_first=True),
                cross_attn_cfg=dict(embed_dims=head_dims, num_heads=4, attn_drop=0.0, proj_drop=0.0,
                                    dropout_layer=None, batch_first=True),
                ffn_cfg=dict(embed_dims=head_dims, feedforward_channels=4 * head_dims, num_fcs=2,
                             act_cfg=dict(type='ReLU', inplace=True), ffn_drop=0.0, dropout_layer=None,
                             add_identity=True)),
            init_cfg=None),
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean',
                      class_weight=[1.0] * 7 + [0.1]),
        loss_mask=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=True, reduction='mean', loss_weight=5.0),
        loss_dice=dict(type='mmdet.DiceLoss', use_sigmoid=True, activate=True, reduction='mean', naive_dice=True,
                       eps=1.0, loss_weight=5.0),
        train_cfg=dict(
            num_points=196,
            oversample_ratio=3.0,
            importance_sample_ratio=0.75,
            assigner=dict(
                type='mmdet.HungarianAssigner',
                match_costs=[
                    dict(type='mmdet.ClassificationCost', weight=2.0),
                    dict(type='mmdet.CrossEntropyLossCost', weight=5.0, use_sigmoid=True),
                    dict(type='mmdet.DiceCost', weight=5.0, pred_act=True, eps=1.0)
                ]),
            sampler=dict(type='mmdet.MaskPseudoSampler'))))
