# Mask2Former (Cheng et al. CVPR 2022, arXiv 2112.01527) on CvT-13, through mmseg 1.2.2's real EncoderDecoder and
# Mask2FormerHead (mmdet 3.3.0's head inside: MSDeformAttnPixelDecoder, 9 masked-attention decoder layers, Hungarian
# matching). CvT is hierarchical like Swin, so no pyramid neck: it returns the levels upernet_cvt.py gives UPerHead,
# its three stage maps (strides 4, 8, 16; 64/192/384 channels, the stage-2 map through the final LayerNorm) and the
# stage-2 map max-pooled to stride 32 (384 channels), so the head sees the strides of mmseg's Swin Mask2Former
# (4, 8, 16, 32): the deformable pixel decoder reads the last 3, the mask features come from the stride-4 map. The cls
# token of stage 2 takes part in attention but is not returned. Inputs normalized with ImageNet mean/std (CvT's
# INPUT.MEAN/STD, and M:8-9).
# The head is mmseg's Mask2Former ADE20K head unchanged, M = open-mmlab/mmsegmentation v1.2.2
# configs/mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py (as shipped in the mmsegmentation 1.2.2 wheel,
# mmseg/.mim/configs; the Swin-T config, mask2former_swin-t_8xb2-160k_ade20k-512x512.py, changes only the backbone and
# in_channels); every value is the BEiT base's (mask2former_beit.py), which cites M line by line.
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
