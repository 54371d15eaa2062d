# Mask2Former on ViT-Adapter-B over BEiT-B, ADE20K 640x640, 8 GPUs x 2 images, 160k iterations: the ADE20K BEiT-L recipe
# with ViT-Adapter's BEiT-B values, from unilm beit_base_patch16_224_pt22k_ft22k. Published: none for ADE20K.
#   python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k_ft22k.pth \
#       checkpoints/beit-base_pt22k-ft22k.pth
_base_ = ['../mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py']
crop_size = (640, 640)
pretrained = 'checkpoints/beit-base_pt22k-ft22k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='beit_mm.BEiTAdapter',
        arch='base',
        img_size=640,
        patch_size=16,
        use_abs_pos_emb=False,
        use_rel_pos_bias=True,
        layer_scale_init_value=1e-6,
        drop_path_rate=0.2,
        conv_inplane=64,
        n_points=4,
        deform_num_heads=12,
        cffn_ratio=0.25,
        deform_ratio=0.5,
        with_cp=False,
        interaction_indexes=[[0, 2], [3, 5], [6, 8], [9, 11]],
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained,
                      keep_init=[r'^(level_embed|spm\.|interactions\.|up\.|norm[1-4]\.)'])),
    neck=None,
    decode_head=dict(in_channels=[768] * 4))
