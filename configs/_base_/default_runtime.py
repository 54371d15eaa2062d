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
# Warn at start when processes x batch x accumulation differs from auto_scale_lr.base_batch_size (the recipe's batch).
custom_hooks = [dict(type='beit_mm.BatchSizeCheckHook')]
