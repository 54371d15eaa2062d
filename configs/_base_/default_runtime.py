# Runtime shared by beit_mm's segmentation configs (mmseg's default_runtime plus the plugin import).
custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmseg'
env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'),  # tools/train.py switches to gloo when CUDA is unavailable
)
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='SegLocalVisualizer', vis_backends=vis_backends, name='visualizer')
log_processor = dict(by_epoch=False)
log_level = 'INFO'
load_from = None
resume = False
tta_model = dict(type='SegTTAModel')
# Before the first iteration: file pairing, decodable files, sizes and label values of the train/val sets (a sample
# of 200 pairs per split is decoded; every batch's labels are checked); a NaN/inf loss stops the run with hints; a
# warning when processes x batch x accumulation differs from auto_scale_lr.base_batch_size (the recipe's batch).
custom_hooks = [
    dict(type='beit_mm.SegDatasetCheckHook', num_samples=200),
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
]
