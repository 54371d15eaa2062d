# Runtime shared by beit_mm's segmentation configs (mmseg's default_runtime plus the plugin import).
custom_imports = dict(imports=['beit_mm'], allow_failed_imports=False)
default_scope = 'mmseg'
env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'),
)
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='SegLocalVisualizer', vis_backends=vis_backends, name='visualizer')
log_processor = dict(by_epoch=False)
log_level = 'INFO'
load_from = None
resume = False
tta_model = dict(type='SegTTAModel')
custom_hooks = [
    dict(type='beit_mm.SegDatasetCheckHook', num_samples=200),
    dict(type='beit_mm.NonFiniteLossHook'),
    dict(type='beit_mm.BatchSizeCheckHook'),
]
