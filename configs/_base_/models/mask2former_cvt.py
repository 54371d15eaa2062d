# Mask2Former on CvT-13 through mmseg 1.2.2's Mask2FormerHead: the three stage maps and the stage-2 map max-pooled to
# stride 32 give the strides of mmseg's Swin Mask2Former (4, 8, 16, 32); the head is mask2former_beit.py's.
# Source: open-mmlab/mmsegmentation v1.2.2 configs/mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py.
_base_ = ['./mask2former_beit.py']
model = dict(
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375]),
    backbone=dict(
        _delete_=True,
        type='beit_mm.CvT',
        arch='cvt-13',
        drop_path_rate=(0.0, 0.0, 0.1),
        out_type='featmap',
        out_indices=(0, 1, 2, 3),
        final_norm=True,
        with_cp=False),
    neck=None,
    decode_head=dict(in_channels=[64, 192, 384, 384]))
