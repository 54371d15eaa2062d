"""Published hyperparameters of beit_mm's full-size configs, each with the reference file and line it was read from.

Data for the recipe tests, which compare the configs with it, never with values read from the config under test.
Sources (repository@commit path:line):

- unilm:  microsoft/unilm@768a3c87 (``beit/``, ``beit/semantic_segmentation/configs``; ``beit2/`` and
  ``beit2/semantic_segmentation/configs`` for BEiT v2 and VQ-KD)
- CvT:    microsoft/CvT@f851e681 (``experiments/imagenet/cvt/*.yaml``, ``lib/``)
- mmseg0: open-mmlab/mmsegmentation 0.x configs (file versions: ``configs/beit/*`` @16e0b2f0,
  ``configs/_base_/models/upernet_beit.py`` @21584257, ``configs/swin/upernet_swin_tiny_patch4_window7_512x512_160k_
  ade20k_pretrain_224x224_1K.py`` @08e92e69, ``configs/_base_/models/upernet_swin.py`` @02f0ddaa)
- mmpretrain: open-mmlab/mmpretrain@08dc8c75 ``configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py``
- timm 0.3.2 (CvT's requirements.txt): ``timm/data/loader.py`` ``create_loader(..., drop_last=is_training)``
- paper: CvT, arXiv 2103.15808, section 4.1 (fine-tuning).

Each key's meaning is defined once, by the reader functions of test_recipes.py ``READERS``; ``precision.dtype`` and
``precision.loss_scale`` say how beit_mm realises the source's fp16 + dynamic loss scaling (``AmpOptimWrapper``)."""
from typing import Any, Dict, NamedTuple, Optional

UNILM = 'microsoft/unilm@768a3c87'
CVT = 'microsoft/CvT@f851e681'
MMSEG0 = 'open-mmlab/mmsegmentation(0.x)'
MMPRETRAIN = 'open-mmlab/mmpretrain@08dc8c75'

IMAGENET_MEAN = [123.675, 116.28, 103.53]  # 255 x timm IMAGENET_DEFAULT_MEAN, RGB
IMAGENET_STD = [58.395, 57.12, 57.375]


class Ref(NamedTuple):
    """A published value and where it was read (``repository@commit path:line``)."""
    value: Any
    source: str


def _src(repo: str, path: str, line: Any, note: str = '') -> str:
    return f'{repo} {path}:{line}' + (f' ({note})' if note else '')


AUTO_NOTE = "fp16 with dynamic loss scaling there; dtype='auto' here: bf16 where the GPU has it, else that"


def _amp(source: str) -> Dict[str, Ref]:
    """The source trains in mixed precision (fp16 autocast with dynamic loss scaling, ``source``): beit_mm's
    ``AmpOptimWrapper(dtype='auto')`` with the default ``loss_scale='dynamic'`` (used where 'auto' resolves to fp16)."""
    return {
        'precision.amp': Ref(True, source),
        'precision.dtype': Ref('auto', source + f' ({AUTO_NOTE})'),
        'precision.loss_scale': Ref('dynamic', source),
    }


def _fp32(source: str) -> Dict[str, Ref]:
    """The source trains in fp32 (``source``): a plain ``OptimWrapper``, no autocast dtype, no loss scaler."""
    return {
        'precision.amp': Ref(False, source),
        'precision.dtype': Ref(None, source),
        'precision.loss_scale': Ref(None, source),
    }


# ------------------------------------------------------------------------------------------------ unilm ADE20K
SEG = 'beit/semantic_segmentation/configs/'
SEG_MODEL = SEG + '_base_/models/upernet_beit.py'
ADE640 = SEG + '_base_/datasets/ade20k_640x640.py'
ADE512 = SEG + '_base_/datasets/ade20k.py'
B640 = SEG + 'beit/upernet/upernet_beit_base_12_640_slide_160k_ade20k_pt2ft.py'
B512 = SEG + 'beit/upernet/upernet_beit_base_12_512_slide_160k_ade20k_pt.py'
L640 = SEG + 'beit/upernet/upernet_beit_large_24_640_slide_160k_ade20k_pt2ft.py'
MMSEG0_BEIT_BASE = 'configs/_base_/models/upernet_beit.py@21584257'
MMSEG0_L = 'configs/beit/upernet_beit-large_fp16_8x1_640x640_160k_ade20k.py@16e0b2f0'


def _upernet_heads(model_file: str, repo: str = UNILM) -> Dict[str, Ref]:
    """UPerHead / FCN auxiliary head settings shared by the unilm (and mmseg Swin) UPerNet bases."""
    first = 31 if repo == UNILM else 30  # line of in_index in the decode head
    return {
        'decode.in_index': Ref([0, 1, 2, 3], _src(repo, model_file, first)),
        'decode.pool_scales': Ref((1, 2, 3, 6), _src(repo, model_file, first + 1)),
        'decode.dropout_ratio': Ref(0.1, _src(repo, model_file, first + 3)),
        'decode.loss_weight': Ref(1.0, _src(repo, model_file, first + 8)),
        'aux.in_index': Ref(2, _src(repo, model_file, first + 12)),
        'aux.channels': Ref(256, _src(repo, model_file, first + 13)),
        'aux.num_convs': Ref(1, _src(repo, model_file, first + 14)),
        'aux.concat_input': Ref(False, _src(repo, model_file, first + 15)),
        'aux.loss_weight': Ref(0.4, _src(repo, model_file, first + 21)),
    }


def _ade_data(dataset_file: str, crop: int, repo: str = UNILM) -> Dict[str, Ref]:
    """unilm / mmseg 0.x ADE20K pipelines (``ade20k.py`` 512 and ``ade20k_640x640.py``: the same line layout)."""
    scale = (4 * crop, crop)
    return {
        'data.mean': Ref(IMAGENET_MEAN, _src(repo, dataset_file, 5)),
        'data.std': Ref(IMAGENET_STD, _src(repo, dataset_file, 5)),
        'data.reduce_zero_label': Ref(True, _src(repo, dataset_file, 9)),
        'data.train_scale': Ref(scale, _src(repo, dataset_file, 10)),
        'data.train_ratio_range': Ref((0.5, 2.0), _src(repo, dataset_file, 10)),
        'data.crop': Ref((crop, crop), _src(repo, dataset_file, 6)),
        'data.cat_max_ratio': Ref(0.75, _src(repo, dataset_file, 11)),
        'data.flip_prob': Ref(0.5, _src(repo, dataset_file, 12)),
        'data.photometric_distortion': Ref(True, _src(repo, dataset_file, 13)),
        'eval.test_scale': Ref(scale, _src(repo, dataset_file, 23)),
        # test pipeline: Resize(keep_ratio) -> RandomFlip(off) -> Normalize -> ImageToTensor; no Pad
        'eval.test_pad_size_divisor': Ref(None, _src(repo, dataset_file, '26-31', 'no Pad in the test pipeline')),
    }


def _seg_seeding(root: str) -> Dict[str, Ref]:
    """How unilm's ADE20K runs seed (``root``: ``beit/`` or ``beit2/`` semantic_segmentation/configs/): the README's
    ``tools/dist_train.sh ... --seed 0 --deterministic``; tools/train.py sets ``cudnn.benchmark`` from the config
    (lines 73-75, ``cudnn_benchmark = True`` in _base_/default_runtime.py line 14) and then calls mmseg 0.x's
    ``set_random_seed(args.seed, deterministic=args.deterministic)`` (lines 126-129), which sets
    ``cudnn.deterministic = True`` and ``cudnn.benchmark = False`` (unilm's copy of it: mmcv_custom/train_api.py
    lines 32-34) and nothing else: no per-process seed, no ``torch.use_deterministic_algorithms``."""
    base = root[:-len('configs/')]
    readme, train, api = base + 'README.md', base + 'tools/train.py', base + 'mmcv_custom/train_api.py'
    return {
        'seed': Ref(0, _src(UNILM, readme, 27, '--seed 0')),
        'seed.per_rank': Ref(False, _src(UNILM, train, 129, 'set_random_seed(args.seed): one seed for all processes')),
        'seed.deterministic_algorithms': Ref(False, _src(UNILM, api, '28-34', 'only the cuDNN flags')),
        'cudnn.deterministic': Ref(True, _src(UNILM, readme, 27, '--deterministic') + '; '
                                   + _src(UNILM, api, 33)),
        'cudnn.benchmark': Ref(False, _src(UNILM, train, '73-75, 129', 'True from the config, then False by '
                                           '--deterministic') + '; ' + _src(UNILM, api, 34)),
    }


def _unilm_seg(config: str, *, img_size: int, layer_scale: float, drop_path: float, out_indices: list, width: int,
               lines: Dict[str, int], lr: float, layer_decay: float, num_layers: int, warmup: int,
               images_per_gpu: int, update_interval: int, max_iters: int, schedule_file: str,
               stride: int, root: str = SEG) -> Dict[str, Ref]:
    """One unilm UPerNet config (its own lines given in ``lines``) plus its bases under ``root`` (``beit/`` or
    ``beit2/`` semantic_segmentation/configs/)."""
    def at(key: str) -> str:
        return _src(UNILM, config, lines[key])
    return {
        'model.img_size': Ref(img_size, at('img_size')),
        'model.layer_scale': Ref(layer_scale, at('init_values')),
        'model.drop_path': Ref(drop_path, at('drop_path_rate')),
        'model.out_indices': Ref(tuple(out_indices), at('out_indices')),
        'model.num_layers': Ref(num_layers, at('depth')),
        'model.embed_dims': Ref(width, at('embed_dim')),
        'model.neck_rescales': Ref([4, 2, 1, 0.5], _src(MMSEG0, MMSEG0_BEIT_BASE, 24,
                                                        'unilm builds the same fpn1-4 in backbone/beit.py:336-350')),
        'decode.in_channels': Ref([width] * 4, at('decode_in')),
        'decode.channels': Ref(width, at('decode_channels')),
        'decode.num_classes': Ref(150, at('num_classes')),
        'aux.in_channels': Ref(width, at('aux_in')),
        **_upernet_heads(root + '_base_/models/upernet_beit.py'),
        'optimizer.type': Ref('AdamW', at('optimizer')),
        'optimizer.lr': Ref(lr, at('optimizer')),
        'optimizer.betas': Ref((0.9, 0.999), at('optimizer')),
        'optimizer.weight_decay': Ref(0.05, at('optimizer')),
        'layer_decay': Ref(layer_decay, at('layer_decay')),
        'clip_grad': Ref(None, at('grad_clip')),
        'schedule.max_iters': Ref(max_iters, _src(UNILM, root + '_base_/schedules/' + schedule_file, 7)),
        'schedule.warmup': Ref(warmup, at('warmup_iters')),
        'schedule.warmup_start': Ref(1e-6, at('warmup_ratio')),
        'schedule.poly_power': Ref(1.0, at('power')),
        'schedule.min_lr': Ref(0.0, at('power')),
        'total_batch': Ref(8 * images_per_gpu * update_interval,
                           at('samples_per_gpu') + f' x 8 GPUs x update_interval {update_interval}'),
        'accumulate': Ref(update_interval, at('update_interval')),
        'eval.mode': Ref('slide', at('slide')),
        'eval.crop': Ref((img_size, img_size), at('slide')),
        'eval.stride': Ref((stride, stride), at('slide')),
        'eval.metric': Ref('mIoU', _src(UNILM, root + '_base_/schedules/' + schedule_file, 9)),
        # runner IterBasedRunnerAmp + DistOptimizerHook(use_fp16=True): apex amp O1 (dynamic loss scaling)
        **_amp(at('amp_runner') + ', ' + str(lines['use_fp16']) + '; ' + _src(UNILM, root[:-len('configs/')]
                                                                            + 'mmcv_custom/train_api.py', '67-68',
                                                                            'apex.amp.initialize O1')),
        **_seg_seeding(root),
    }


_B640 = _unilm_seg(B640, img_size=640, layer_scale=0.1, drop_path=0.1, out_indices=[3, 5, 7, 11], width=768,
                   lines=dict(img_size=23, embed_dim=25, depth=26, init_values=32, drop_path_rate=33, out_indices=34,
                              decode_in=37, num_classes=38, decode_channels=39, aux_in=42, slide=45, optimizer=54,
                              layer_decay=56, warmup_iters=60, warmup_ratio=61, power=62, samples_per_gpu=65,
                              update_interval=73, grad_clip=74, amp_runner=67, use_fp16=77),
                   lr=3e-5, layer_decay=0.9, num_layers=12, warmup=1500, images_per_gpu=2, update_interval=1,
                   max_iters=160000, schedule_file='schedule_160k.py', stride=426)
_B640.update(_ade_data(ADE640, 640))

_B512 = _unilm_seg(B512, img_size=512, layer_scale=0.1, drop_path=0.1, out_indices=[3, 5, 7, 11], width=768,
                   lines=dict(img_size=23, embed_dim=25, depth=26, init_values=32, drop_path_rate=33, out_indices=34,
                              decode_in=37, num_classes=38, decode_channels=39, aux_in=42, slide=45, optimizer=54,
                              layer_decay=56, warmup_iters=60, warmup_ratio=61, power=62, samples_per_gpu=65,
                              update_interval=73, grad_clip=74, amp_runner=67, use_fp16=77),
                   lr=7e-4, layer_decay=0.65, num_layers=12, warmup=1500, images_per_gpu=2, update_interval=1,
                   max_iters=160000, schedule_file='schedule_160k.py', stride=341)
_B512.update(_ade_data(ADE512, 512))

# BEiT-L: unilm counts 160k optimizer updates as 320k iterations with update_interval 2 (line 18)
_L640 = _unilm_seg(L640, img_size=640, layer_scale=1e-6, drop_path=0.2, out_indices=[7, 11, 15, 23], width=1024,
                   lines=dict(img_size=24, embed_dim=26, depth=27, init_values=33, drop_path_rate=34, out_indices=35,
                              decode_in=38, num_classes=39, decode_channels=40, aux_in=43, slide=46, optimizer=55,
                              layer_decay=57, warmup_iters=61, warmup_ratio=62, power=63, samples_per_gpu=66,
                              update_interval=75, grad_clip=76, amp_runner=68, use_fp16=79),
                   lr=2e-5, layer_decay=0.95, num_layers=24, warmup=3000, images_per_gpu=1, update_interval=2,
                   max_iters=320000, schedule_file='schedule_320k.py', stride=426)
_L640.update(_ade_data(ADE640, 640))
_L640['model.layer_scale'] = Ref(1e-6, _L640['model.layer_scale'].source + '; ' + _src(MMSEG0, MMSEG0_L, 15))

# ------------------------------------------------------------------------------ mmseg 0.x Swin UPerNet (for CvT)
SWIN = 'configs/swin/upernet_swin_tiny_patch4_window7_512x512_160k_ade20k_pretrain_224x224_1K.py@08e92e69'
SWIN_MODEL = 'configs/_base_/models/upernet_swin.py@02f0ddaa'


def _cvt_seg(depths: list) -> Dict[str, Ref]:
    """No published CvT UPerNet recipe: the configs claim mmseg 0.x's Swin-T UPerNet 512x512 160k recipe, CvT's own
    ImageNet drop path, and unilm's layer decay 0.9 (BEiT ADE20K)."""
    refs = {
        'model.depths': Ref(depths, _src(CVT, 'experiments/imagenet/cvt/cvt-%d-224x224.yaml' % sum(depths), 17)),
        'model.drop_path_per_stage': Ref([0.0, 0.0, 0.1],
                                         _src(CVT, 'experiments/imagenet/cvt/cvt-%d-224x224.yaml' % sum(depths), 21)),
        'decode.channels': Ref(512, _src(MMSEG0, SWIN_MODEL, 32)),
        'decode.num_classes': Ref(150, _src(MMSEG0, SWIN, 16)),
        'aux.in_index': Ref(2, _src(MMSEG0, SWIN_MODEL, 42)),
        'aux.channels': Ref(256, _src(MMSEG0, SWIN_MODEL, 43)),
        'aux.num_convs': Ref(1, _src(MMSEG0, SWIN_MODEL, 44)),
        'aux.loss_weight': Ref(0.4, _src(MMSEG0, SWIN_MODEL, 51)),
        'decode.pool_scales': Ref((1, 2, 3, 6), _src(MMSEG0, SWIN_MODEL, 31)),
        'decode.loss_weight': Ref(1.0, _src(MMSEG0, SWIN_MODEL, 38)),
        'optimizer.type': Ref('AdamW', _src(MMSEG0, SWIN, 23)),
        'optimizer.lr': Ref(6e-5, _src(MMSEG0, SWIN, 24)),
        'optimizer.betas': Ref((0.9, 0.999), _src(MMSEG0, SWIN, 25)),
        'optimizer.weight_decay': Ref(0.01, _src(MMSEG0, SWIN, 26)),
        'layer_decay': Ref(0.9, _src(UNILM, B640, 56, "beit_mm's choice for CvT: BEiT-B 640's layer decay")),
        'schedule.max_iters': Ref(160000, _src(UNILM, SEG + '_base_/schedules/schedule_160k.py', 7)),
        'schedule.warmup': Ref(1500, _src(MMSEG0, SWIN, 38)),
        'schedule.warmup_start': Ref(1e-6, _src(MMSEG0, SWIN, 39)),
        'schedule.poly_power': Ref(1.0, _src(MMSEG0, SWIN, 40)),
        'schedule.min_lr': Ref(0.0, _src(MMSEG0, SWIN, 41)),
        'total_batch': Ref(16, _src(MMSEG0, SWIN, '44-45', '8 GPUs x 2 images')),
        'accumulate': Ref(1, _src(MMSEG0, SWIN, 45, 'no cumulative optimizer hook')),
        'eval.mode': Ref('slide', _src(UNILM, B512, 45, 'the 512 slide setting of unilm')),
        'eval.crop': Ref((512, 512), _src(UNILM, B512, 45)),
        'eval.stride': Ref((341, 341), _src(UNILM, B512, 45)),
        **_fp32(_src(MMSEG0, SWIN, '1-45', 'no fp16 = dict(): fp32; optimizer_config = dict() in schedule_160k.py:3')),
    }
    refs.update(_ade_data(ADE512, 512))
    return refs


# ----------------------------------------------------------------------------------- unilm ImageNet BEiT recipes
README = 'beit/README.md'
PRETRAIN = 'beit/run_beit_pretraining.py'
FINETUNE = 'beit/run_class_finetuning.py'
GET_STARTED = 'beit/get_started_for_image_classification.md'
DATASETS = 'beit/datasets.py'


DALL_E_FP16 = ('openai/DALL-E (dall-e 0.1) dall_e/utils.py:32-36 (Conv2d use_float16: fp16 on CUDA; encoder.py:81: '
               'not the output conv)')


def _beit_mim(epochs: int, epochs_source: str) -> Dict[str, Ref]:
    """unilm 'Pre-training BEiT-base on ImageNet-1k' (beit/README.md lines 136-141) with run_beit_pretraining.py's
    defaults."""
    return {
        'model.layer_scale': Ref(0.1, _src(UNILM, README, 140)),
        'model.drop_path': Ref(0.1, _src(UNILM, README, 140)),
        'model.img_size': Ref(224, _src(UNILM, PRETRAIN, 56)),
        'optimizer.type': Ref('AdamW', _src(UNILM, PRETRAIN, 65, "--opt default 'adamw'")),
        'optimizer.lr': Ref(1.5e-3, _src(UNILM, README, 139)),
        'optimizer.betas': Ref((0.9, 0.999), _src(UNILM, PRETRAIN, 69)),
        'optimizer.weight_decay': Ref(0.05, _src(UNILM, PRETRAIN, 75)),
        'clip_grad': Ref(3.0, _src(UNILM, README, 140)),
        'total_batch': Ref(2048, _src(UNILM, README, '136, 139', '16 GPUs x --batch_size 128')),
        'accumulate': Ref(1, _src(UNILM, README, 139, 'no --update_freq in run_beit_pretraining.py')),
        'schedule.max_epochs': Ref(epochs, epochs_source),
        'schedule.warmup': Ref(10, _src(UNILM, README, 139)),
        'schedule.min_lr': Ref(1e-5, _src(UNILM, PRETRAIN, 85)),
        'data.mean': Ref(IMAGENET_MEAN, _src(UNILM, README, 141, '--imagenet_default_mean_and_std')),
        'data.std': Ref(IMAGENET_STD, _src(UNILM, README, 141, '--imagenet_default_mean_and_std')),
        'data.color_jitter': Ref((0.4, 0.4, 0.4), _src(UNILM, DATASETS, 34)),
        'data.flip_prob': Ref(0.5, _src(UNILM, DATASETS, 35)),
        'data.rrc_scale': Ref((0.08, 1.0), _src(UNILM, 'beit/transforms.py', 82)),
        'data.crop': Ref(224, _src(UNILM, PRETRAIN, 56)),
        'data.interpolation': Ref('bicubic', _src(UNILM, PRETRAIN, 94)),
        'mim.second_size': Ref(112, _src(UNILM, PRETRAIN, 58)),
        'mim.second_interpolation': Ref('lanczos', _src(UNILM, PRETRAIN, 96)),
        'mim.num_masking_patches': Ref(75, _src(UNILM, README, 137)),
        'mim.min_num_patches': Ref(16, _src(UNILM, PRETRAIN, 54)),
        'mim.max_num_patches': Ref(None, _src(UNILM, PRETRAIN, 53)),
        'data.drop_last': Ref(True, _src(UNILM, PRETRAIN, 203)),
        **_amp(_src(UNILM, 'beit/engine_for_pretraining.py', 54, 'torch.cuda.amp.autocast') + '; '
               + _src(UNILM, PRETRAIN, 225, 'NativeScaler: GradScaler')),
        'cudnn.benchmark': Ref(True, _src(UNILM, PRETRAIN, 163, 'cudnn.benchmark = True')),
        # the DALL-E ids in reduced precision: the released dall_e encoder unilm loads runs its convs in fp16 on CUDA
        'tokenizer.reduced_precision': Ref(True, _src(UNILM, 'beit/modeling_discrete_vae.py', '203, 214, 223-225',
                                                      'dall_e.load_model(encoder.pkl)') + '; ' + DALL_E_FP16),
    }


_MIM800 = _beit_mim(800, _src(UNILM, README, 139))
_MIM300 = _beit_mim(300, _src(MMPRETRAIN, 'configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 118))

_FT100 = {
    'model.layer_scale': Ref(0.1, _src(UNILM, FINETUNE, 52)),
    'model.drop_path': Ref(0.1, _src(UNILM, GET_STARTED, 68)),
    'model.img_size': Ref(224, _src(UNILM, FINETUNE, 55)),
    'head.init_std': Ref(0.02 * 0.001, _src(UNILM, FINETUNE, 144, 'trunc_normal 0.02 x --init_scale 0.001')),
    'optimizer.type': Ref('AdamW', _src(UNILM, FINETUNE, 72)),
    'optimizer.lr': Ref(4e-3, _src(UNILM, GET_STARTED, 67)),
    'optimizer.betas': Ref((0.9, 0.999), _src(UNILM, FINETUNE, 76, '--opt_betas None: AdamW defaults')),
    'optimizer.weight_decay': Ref(0.05, _src(UNILM, GET_STARTED, 69)),
    'layer_decay': Ref(0.65, _src(UNILM, GET_STARTED, 68)),
    'clip_grad': Ref(None, _src(UNILM, FINETUNE, 78)),
    'total_batch': Ref(1024, _src(UNILM, GET_STARTED, '64, 67', '8 GPUs x --batch_size 128, --update_freq 1')),
    'accumulate': Ref(1, _src(UNILM, GET_STARTED, 67)),
    'schedule.max_epochs': Ref(100, _src(UNILM, GET_STARTED, 68)),
    'schedule.warmup': Ref(20, _src(UNILM, GET_STARTED, 68)),
    'schedule.min_lr': Ref(1e-6, _src(UNILM, FINETUNE, 94)),
    'data.crop': Ref(224, _src(UNILM, FINETUNE, 55)),
    'data.interpolation': Ref('bicubic', _src(UNILM, FINETUNE, 109)),
    'data.randaugment': Ref('rand-m9-mstd0.5-inc1', _src(UNILM, FINETUNE, 105)),
    'data.randaugment_fill': Ref([124, 116, 104], _src(UNILM, DATASETS, 144, 'timm img_mean = round(255 * mean) '
                                                   "of the fine-tuning normalization, ImageNet's here")),
    'data.reprob': Ref(0.25, _src(UNILM, FINETUNE, 116)),
    'data.remode_pixel_normal': Ref(True, _src(UNILM, FINETUNE, 118, "remode 'pixel': N(0, 1) in normalized "
                                               'space = mean + std * N(0, 1) in pixels')),
    'data.drop_last': Ref(True, _src(UNILM, FINETUNE, 272)),
    'mixup': Ref(0.8, _src(UNILM, GET_STARTED, 69)),
    'cutmix': Ref(1.0, _src(UNILM, GET_STARTED, 69)),
    'label_smoothing': Ref(0.1, _src(UNILM, FINETUNE, 107)),
    'eval.resize_short': Ref(256, _src(UNILM, DATASETS, '157-161', 'int(224 / (224 / 256))')),
    'eval.center_crop': Ref(224, _src(UNILM, DATASETS, 165)),
    'eval.interpolation': Ref('bicubic', _src(UNILM, DATASETS, 163, 'interpolation=3')),
}

# ---------------------------------------------------------------------------------------- CvT ImageNet recipes
Y13 = 'experiments/imagenet/cvt/cvt-13-224x224.yaml'
Y21 = 'experiments/imagenet/cvt/cvt-21-224x224.yaml'
YW24 = 'experiments/imagenet/cvt/cvt-w24-384x384.yaml'
DEFAULT = 'lib/config/default.py'
TRANSFORMS = 'lib/dataset/transformas/build.py'


def _cvt_common(yaml: str, o: int) -> Dict[str, Ref]:
    """Values both CvT-13's and CvT-21's yaml give (``o``: CvT-21's TRAIN block sits one line lower)."""
    return {
        'model.drop_path_per_stage': Ref([0.0, 0.0, 0.1], _src(CVT, yaml, 21)),
        'optimizer.type': Ref('AdamW', _src(CVT, yaml, 78 + o)),
        'optimizer.betas': Ref((0.9, 0.999), _src(CVT, 'lib/optim/build.py', 138, 'optim.AdamW without betas: torch defaults')),
        'clip_grad': Ref(None, _src(CVT, DEFAULT, 123, 'TRAIN.CLIP_GRAD_NORM 0.0, not set by the yaml')),
        'schedule.max_epochs': Ref(300, _src(CVT, yaml, 68 + o)),
        'schedule.warmup': Ref(5, _src(CVT, yaml, 73 + o)),
        'schedule.warmup_start_lr': Ref(1e-6, _src(CVT, yaml, 74 + o)),
        'schedule.min_lr': Ref(1e-5, _src(CVT, yaml, 75 + o)),
        'mixup': Ref(0.8, _src(CVT, yaml, 33)),
        'cutmix': Ref(1.0, _src(CVT, yaml, 34)),
        'label_smoothing': Ref(0.1, _src(CVT, yaml, 47)),
        'data.mean': Ref(IMAGENET_MEAN, _src(CVT, DEFAULT, 68)),
        'data.std': Ref(IMAGENET_STD, _src(CVT, DEFAULT, 69)),
        'data.crop': Ref(224, _src(CVT, yaml, 66 + o)),
        'data.rrc_scale': Ref((0.08, 1.0), _src(CVT, DEFAULT, 73)),
        'data.flip_prob': Ref(0.5, _src(CVT, yaml, 42)),
        'eval.resize_short': Ref(256, _src(CVT, 'lib/dataset/transformas/build.py', 107, 'int(224 / 0.875)')),
        'eval.center_crop': Ref(224, _src(CVT, DEFAULT, 131, 'TEST.CENTER_CROP True')),
        'eval.interpolation': Ref('bicubic', _src(CVT, yaml, 62, 'TEST.INTERPOLATION 3')),
        **_cvt_amp_cudnn(yaml),
    }


def _cvt_amp_cudnn(yaml: str) -> Dict[str, Ref]:
    """AMP.ENABLED true (fp16 autocast, lib/core/function.py:47, with tools/train.py:123's GradScaler) and
    CUDNN.BENCHMARK true (lib/utils/utils.py:72) in every CvT ImageNet yaml."""
    return {
        **_amp(_src(CVT, yaml, 5, 'AMP.ENABLED true') + '; ' + _src(CVT, 'tools/train.py', 123, 'GradScaler')),
        'cudnn.benchmark': Ref(True, _src(CVT, yaml, 49, 'CUDNN.BENCHMARK true')),
    }


_CVT13 = {
    **_cvt_common(Y13, 0),
    'model.depths': Ref([1, 2, 10], _src(CVT, Y13, 17)),
    'optimizer.lr': Ref(2.5e-4 * 8, _src(CVT, Y13, 65, f'x 8 GPUs: {DEFAULT}:175-176 LR *= world_size')),
    'optimizer.weight_decay': Ref(0.05, _src(CVT, Y13, 79)),
    'total_batch': Ref(2048, _src(CVT, Y13, 64, '256 per GPU x 8 GPUs (README.md:99 run.sh -g 8)')),
    'data.interpolation': Ref('bicubic', _src(CVT, Y13, 45, 'timm loader (USE_LOADER true, line 36)')),
    'data.randaugment': Ref('rand-m9-mstd0.5-inc1', _src(CVT, Y13, 41)),
    'data.randaugment_fill': Ref([124, 116, 104], _src(CVT, 'lib/dataset/build.py', 96,
                                                       'timm img_mean = round(255 * INPUT.MEAN)')),
    'data.reprob': Ref(0.25, _src(CVT, Y13, 40)),
    'data.remode_pixel_normal': Ref(True, _src(CVT, Y13, 38)),
    'data.drop_last': Ref(True, 'timm 0.3.2 timm/data/loader.py create_loader (drop_last=is_training; '
                                f'{CVT} lib/dataset/build.py:77)'),
    'data.sampler': Ref('DefaultSampler', _src(CVT, 'lib/dataset/build.py', '66-69', 'DistributedSampler')),
}

_CVT21 = {
    **_cvt_common(Y21, 1),
    'model.depths': Ref([1, 4, 16], _src(CVT, Y21, 17)),
    'optimizer.lr': Ref(1.25e-4 * 8, _src(CVT, Y21, 66, f'x 8 GPUs: {DEFAULT}:175-176 LR *= world_size')),
    'optimizer.weight_decay': Ref(0.1, _src(CVT, Y21, 80)),
    'total_batch': Ref(1024, _src(CVT, Y21, 65, '128 per GPU x 8 GPUs')),
    'data.interpolation': Ref('bilinear', _src(CVT, TRANSFORMS, 82, f'cfg.AUG.INTERPOLATION = 2, {DEFAULT}:88')),
    'data.randaugment': Ref(None, _src(CVT, Y21, 36, 'USE_LOADER false: lib/dataset/transformas/build.py:76-100')),
    'data.reprob': Ref(0.0, _src(CVT, Y21, 36, 'USE_LOADER false: no random erasing')),
    'data.color_jitter': Ref(None, _src(CVT, TRANSFORMS, '87-89', f'probability 0, {DEFAULT}:75')),
    'data.drop_last': Ref(True, _src(CVT, 'lib/dataset/build.py', 112)),
    'data.sampler': Ref('RepeatAugSampler', _src(CVT, Y21, 58, 'repeated_aug -> lib/dataset/build.py:63-65 '
                                                 'RASampler, 3 repeats')),
}

_CVTW24 = {
    'model.depths': Ref([2, 2, 20], _src(CVT, YW24, 17)),
    'model.drop_path_per_stage': Ref([0.0, 0.0, 0.3], _src(CVT, YW24, 21)),
    'optimizer.type': Ref('SGD', 'CvT paper (arXiv 2103.15808) section 4.1, fine-tuning'),
    'optimizer.momentum': Ref(0.9, 'CvT paper (arXiv 2103.15808) section 4.1, fine-tuning'),
    'total_batch': Ref(512, 'CvT paper (arXiv 2103.15808) section 4.1, fine-tuning'),
    'schedule.max_iters': Ref(20000, 'CvT paper (arXiv 2103.15808) section 4.1, fine-tuning'),
    'data.crop': Ref(384, _src(CVT, YW24, 67)),
    'eval.resize': Ref((384, 384), _src(CVT, YW24, 60)),
    'eval.center_crop': Ref(None, _src(CVT, YW24, 63, 'CENTER_CROP False')),
    'eval.interpolation': Ref('bicubic', _src(CVT, YW24, 62, 'TEST.INTERPOLATION 3')),
    **_cvt_amp_cudnn(YW24),
}

# CvT-13 MIM: BEiT's pretraining recipe (300 epochs) on a CvT-13 with CvT-13's drop path
_CVT13_MIM = {k: v for k, v in _MIM300.items() if k not in ('model.layer_scale', 'model.drop_path', 'model.img_size')}
_CVT13_MIM['model.drop_path_per_stage'] = Ref([0.0, 0.0, 0.1], _src(CVT, Y13, 21))
_CVT13_MIM['model.depths'] = Ref([1, 2, 10], _src(CVT, Y13, 17))

RECIPES: Dict[str, Dict[str, Ref]] = {
    'beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py': _B640,
    'beit/beit-base_upernet_8xb2-160k_ade20k-512x512.py': _B512,
    'beit/beit-base_beit-pre_upernet_8xb2-160k_ade20k-512x512.py': _B512,
    'beit/beit-large_upernet_8xb1-amp-160k_ade20k-640x640.py': _L640,
    'beit/beit-large_upernet_8xb1-amp-fsdp-160k_ade20k-640x640.py': _L640,
    'beit/beit_beit-base-p16_8xb256-amp-coslr-800e_in1k.py': _MIM800,
    'beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py': _MIM300,
    'beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py': _FT100,
    'cvt/cvt-13_8xb256-300e_in1k.py': _CVT13,
    'cvt/cvt-21_8xb128-300e_in1k.py': _CVT21,
    'cvt/cvt-w24_in22k-pre_8xb64-20k_in1k-384px.py': _CVTW24,
    'cvt/beit_cvt-13_8xb256-amp-coslr-300e_in1k.py': _CVT13_MIM,
    'cvt/cvt-13_upernet_8xb2-160k_ade20k-512x512.py': _cvt_seg([1, 2, 10]),
    'cvt/cvt-21_upernet_8xb2-160k_ade20k-512x512.py': _cvt_seg([1, 4, 16]),
}


# ---------------------------------------------------------------------------------------- unilm BEiT v2 (beit2/)
PT2 = 'beit2/PRETRAINING.md'
RUN_PT2 = 'beit2/run_beitv2_pretraining.py'
FT2 = 'beit2/get_started_for_image_classification.md'
RUN_FT2 = 'beit2/run_class_finetuning.py'
TOK2 = 'beit2/TOKENIZER.md'
RUN_VQKD = 'beit2/run_vqkd_training.py'
SEG2 = 'beit2/semantic_segmentation/configs/'
ADE2 = SEG2 + '_base_/datasets/ade20k.py'
MASKING2 = 'beit2/masking_generator.py'


def _v2(path: str, line: Any, note: str = '') -> str:
    return _src(UNILM, path, line, note)


def _beitv2_mim(arch: str, lines: Dict[str, Any], layer_scale: float, early_layers: int) -> Dict[str, Ref]:
    """unilm PRETRAINING.md's base (lines 13-37) or large (lines 53-77) command (``lines``: where each flag sits)
    with run_beitv2_pretraining.py's defaults for the rest."""
    def at(key: str, note: str = '') -> str:
        return _v2(PT2, lines[key], note)
    return {
        'model.arch': Ref(arch, at('model')),
        'model.cls_pretrain': Ref(dict(early_layers=early_layers, head_layers=2),
                                  at('early_layers', 'and the next line')),
        'model.layer_scale': Ref(layer_scale, at('layer_scale')),
        'model.drop_path': Ref(0.1, at('drop_path')),
        'model.img_size': Ref(224, _v2(RUN_PT2, 61)),
        'model.shared_rel_pos_bias': Ref(True, _v2(RUN_PT2, 50, 'rel_pos_bias default True: one shared table')),
        'model.abs_pos_emb': Ref(False, _v2(RUN_PT2, 52)),
        'head.vocab_size': Ref(8192, _v2(RUN_PT2, 75)),
        'optimizer.type': Ref('AdamW', _v2(RUN_PT2, 79)),
        'optimizer.lr': Ref(1.5e-3, at('lr')),
        'optimizer.betas': Ref((0.9, 0.999), at('betas')),
        'optimizer.eps': Ref(1e-8, at('eps')),
        'optimizer.weight_decay': Ref(0.05, _v2(RUN_PT2, 89)),
        'layer_decay': Ref(1.0, _v2(RUN_PT2, 272, 'create_optimizer(args, model): no layer decay')),
        'clip_grad': Ref(3.0, at('clip_grad')),
        'total_batch': Ref(2048, at('batch', 'GPUs x --batch_size')),
        'accumulate': Ref(1, _v2(RUN_PT2, 272, 'no --update_freq')),
        'schedule.max_epochs': Ref(1600, at('epochs')),
        'schedule.warmup': Ref(10, at('warmup')),
        'schedule.min_lr': Ref(1e-5, _v2(RUN_PT2, 99)),
        'data.mean': Ref(IMAGENET_MEAN, at('mean_std', '--imagenet_default_mean_and_std; datasets.py:31')),
        'data.std': Ref(IMAGENET_STD, at('mean_std', '--imagenet_default_mean_and_std; datasets.py:32')),
        'data.color_jitter': Ref((0.4, 0.4, 0.4), _v2('beit2/datasets.py', 36)),
        'data.flip_prob': Ref(0.5, _v2('beit2/datasets.py', 37)),
        'data.crop': Ref(224, _v2(RUN_PT2, 61)),
        'data.rrc_scale': Ref((0.2, 1.0), at('min_crop_scale')),
        'data.interpolation': Ref('bicubic', _v2(RUN_PT2, 111)),
        'data.drop_last': Ref(True, _v2(RUN_PT2, 251)),
        'mim.second_size': Ref(224, at('second_size')),
        'mim.second_interpolation': Ref('bicubic', at('second_interpolation')),
        'mim.num_masking_patches': Ref(75, at('num_mask')),
        'mim.min_num_patches': Ref(16, _v2(RUN_PT2, 59)),
        'mim.max_num_patches': Ref(None, _v2(RUN_PT2, 58)),
        'mim.min_aspect': Ref(0.3, _v2(MASKING2, 32)),
        'mim.exact_count': Ref(True, _v2(MASKING2, '92-105', 'fill up to num_masking_patches, assert')),
        # get_codebook_indices -> get_tokens -> encode (modeling_vqkd.py lines 142-176): the decoder is never run
        'tokenizer.with_decoder': Ref(False, _v2('beit2/modeling_vqkd.py', '142-176', 'tokenizing runs no decoder')),
        **_amp(_v2('beit2/engine_for_pretraining.py', 60, 'torch.cuda.amp.autocast') + '; '
               + _v2(RUN_PT2, 274, 'NativeScaler: GradScaler')),
        'cudnn.benchmark': Ref(True, _v2(RUN_PT2, 213, 'cudnn.benchmark = True')),
    }


_V2_BASE_LINES = dict(model=18, early_layers=20, num_mask=22, second_size=23, second_interpolation=24,
                      min_crop_scale=25, batch='28, 41', lr=29, warmup=30, clip_grad=31, drop_path=32,
                      layer_scale=33, mean_std=34, betas=35, eps=36, epochs=37)
_V2_MIM1600 = _beitv2_mim('base', _V2_BASE_LINES, 0.1, 9)
_V2_MIM300 = dict(_V2_MIM1600, **{
    'schedule.max_epochs': Ref(300, _v2(PT2, 44)),
    'optimizer.betas': Ref((0.9, 0.98), _v2(PT2, 45)),
    'model.drop_path': Ref(0.0, _v2(PT2, 46)),
})
_V2_MIM1600_L = _beitv2_mim('large', dict(model=58, early_layers=60, num_mask=62, second_size=63,
                                          second_interpolation=64, min_crop_scale=65, batch='68, 81', lr=69,
                                          warmup=70, clip_grad=71, drop_path=72, layer_scale=73, mean_std=74,
                                          betas=75, eps=76, epochs=77), 1e-5, 21)


def _finetune_seeding(run: str, seed_default: int, seed_rank: int, benchmark: int) -> Dict[str, Ref]:
    """unilm's ImageNet fine-tuning seeds every process with ``args.seed + utils.get_rank()`` (``run``:
    beit/ or beit2/run_class_finetuning.py) and sets ``cudnn.benchmark = True``."""
    return {
        'seed': Ref(0, _src(UNILM, run, seed_default, "--seed default 0")),
        'seed.per_rank': Ref(True, _src(UNILM, run, seed_rank, 'seed = args.seed + utils.get_rank()')),
        'seed.deterministic_algorithms': Ref(False, _src(UNILM, run, f'{seed_rank}-{benchmark}', 'seeds only')),
        'cudnn.benchmark': Ref(True, _src(UNILM, run, benchmark, 'cudnn.benchmark = True')),
    }


_FT100.update(_finetune_seeding(FINETUNE, 167, 228, 233))
_FT100.update(_amp(_src(UNILM, GET_STARTED, 69, '--enable_deepspeed') + '; '
                   + _src(UNILM, 'beit/utils.py', '581-586', 'DeepSpeed fp16, loss_scale 0: dynamic')))


def _beitv2_ft(arch: str, lr: Ref, epochs: Ref, warmup: Ref, layer_decay: Ref, drop_path: Ref,
               batch: Ref) -> Dict[str, Ref]:
    """get_started_for_image_classification.md's fine-tuning of a pretrained (not intermediate fine-tuned) model:
    the given values, the rest from the doc's command (lines 22-44 base, 60-82 large) and run_class_finetuning.py's
    defaults."""
    return {
        'model.arch': Ref(arch, _v2(FT2, 29 if arch == 'base' else 67)),
        'model.drop_path': drop_path,
        'model.layer_scale': Ref(0.1, _v2(RUN_FT2, 62, 'replaced by the checkpoint\'s gamma')),
        'model.img_size': Ref(224, _v2(RUN_FT2, 65)),
        'model.mean_pooling': Ref(True, _v2(RUN_FT2, 157)),
        'head.init_std': Ref(0.02 * 0.001, _v2(RUN_FT2, 155, 'trunc_normal 0.02 x --init_scale 0.001')),
        'optimizer.type': Ref('AdamW', _v2(RUN_FT2, 82, "--opt default 'adamw'")),
        'optimizer.lr': lr,
        'optimizer.betas': Ref((0.9, 0.999), _v2(RUN_FT2, 86, '--opt_betas None: AdamW defaults')),
        'optimizer.eps': Ref(1e-8, _v2(RUN_FT2, 84)),
        'optimizer.weight_decay': Ref(0.05, _v2(FT2, 30 if arch == 'base' else 68)),
        'layer_decay': layer_decay,
        'clip_grad': Ref(None, _v2(RUN_FT2, 88)),
        'total_batch': batch,
        'accumulate': Ref(1, 'beit_mm keeps the batch on the GPUs (unilm large: --update_freq 2, ' + _v2(FT2, 72) + ')'
                          if arch == 'large' else _v2(FT2, 34)),
        'schedule.max_epochs': epochs,
        'schedule.warmup': warmup,
        'schedule.min_lr': Ref(1e-6, _v2(RUN_FT2, 104)),
        'mixup': Ref(0.8, _v2(FT2, 50 if arch == 'base' else 88)),
        'cutmix': Ref(1.0, _v2(FT2, 51 if arch == 'base' else 89)),
        'label_smoothing': Ref(0.1, _v2(RUN_FT2, 117)),
        'data.mean': Ref(IMAGENET_MEAN, _v2(FT2, 41 if arch == 'base' else 79, '--imagenet_default_mean_and_std')),
        'data.std': Ref(IMAGENET_STD, _v2(FT2, 41 if arch == 'base' else 79, '--imagenet_default_mean_and_std')),
        'data.crop': Ref(224, _v2(RUN_FT2, 65)),
        'data.interpolation': Ref('bicubic', _v2(RUN_FT2, 119)),
        'data.randaugment': Ref('rand-m9-mstd0.5-inc1', _v2(RUN_FT2, 115)),
        'data.reprob': Ref(0.25, _v2(RUN_FT2, 126)),
        'data.remode_pixel_normal': Ref(True, _v2(RUN_FT2, 128, "remode 'pixel'")),
        'data.drop_last': Ref(True, _v2(RUN_FT2, 304)),
        **_amp(_v2(FT2, 44 if arch == 'base' else 82, '--enable_deepspeed') + '; '
               + _v2('beit2/utils.py', '667-672', 'DeepSpeed fp16, loss_scale 0: dynamic')),
        **_finetune_seeding(RUN_FT2, 180, 260, 265),
    }


_V2_FT1600 = _beitv2_ft('base', lr=Ref(5e-4, _v2(FT2, 48)), epochs=Ref(100, _v2(FT2, 49)),
                        warmup=Ref(20, _v2(FT2, 35)), layer_decay=Ref(0.6, _v2(FT2, 52)),
                        drop_path=Ref(0.2, _v2(FT2, 53)), batch=Ref(1024, _v2(FT2, 46, '8 GPUs x 128')))
_V2_FT300 = dict(_V2_FT1600, **{'layer_decay': Ref(0.65, _v2(FT2, 52, '0.65 for 300 epochs')),
                                'model.drop_path': Ref(0.1, _v2(FT2, 53, '0.1 for 300 epochs'))})
_V2_FT1600_L = _beitv2_ft('large', lr=Ref(2e-4, _v2(FT2, 86, '2e-4 for 1600 epochs pretrained')),
                          epochs=Ref(50, _v2(FT2, 87)), warmup=Ref(5, _v2(FT2, 73)),
                          layer_decay=Ref(0.8, _v2(FT2, 90)), drop_path=Ref(0.2, _v2(FT2, 91)),
                          batch=Ref(1024, _v2(FT2, 84, '8 GPUs x 64 x --update_freq 2')))

_V2_SEG_BASE_LINES = dict(img_size=22, embed_dim=24, depth=25, init_values=31, drop_path_rate=32, out_indices=34,
                          decode_in=37, num_classes=38, decode_channels=39, aux_in=42, slide=45, optimizer=48,
                          layer_decay=50, warmup_iters=54, warmup_ratio=55, power=56, samples_per_gpu=59,
                          update_interval=67, grad_clip=68, amp_runner=61, use_fp16=71)
_V2_SEG_LARGE_LINES = dict(img_size=22, embed_dim=24, depth=25, init_values=31, drop_path_rate=32, out_indices=33,
                           decode_in=36, num_classes=37, decode_channels=38, aux_in=41, slide=44, optimizer=47,
                           layer_decay=49, warmup_iters=53, warmup_ratio=54, power=55, samples_per_gpu=58,
                           update_interval=66, grad_clip=67, amp_runner=60, use_fp16=70)


def _beitv2_seg(name: str, large: bool, lr: float, layer_decay: float) -> Dict[str, Ref]:
    """A beit2 UPerNet 512 config (``name`` under configs/beit/upernet/) with its ade20k.py and schedule_160k.py."""
    config = SEG2 + 'beit/upernet/' + name
    lines = _V2_SEG_LARGE_LINES if large else _V2_SEG_BASE_LINES
    refs = _unilm_seg(config, img_size=512, layer_scale=1e-6 if large else 0.1, drop_path=0.2 if large else 0.15,
                      out_indices=[7, 11, 15, 23] if large else [3, 5, 7, 11], width=1024 if large else 768,
                      lines=lines, lr=lr, layer_decay=layer_decay, num_layers=24 if large else 12, warmup=1500,
                      images_per_gpu=2, update_interval=1, max_iters=160000, schedule_file='schedule_160k.py',
                      stride=341, root=SEG2)
    refs.update(_ade_data(ADE2, 512))
    refs['eval.test_pad_size_divisor'] = Ref(None, _v2(ADE2, '19-33', 'no Pad in the test pipeline'))
    refs['eval.save_best'] = Ref(None, _v2(SEG2 + '_base_/schedules/schedule_160k.py', '8-9', 'no save_best'))
    return refs


def _vqkd(arch: str, model_line: str) -> Dict[str, Ref]:
    """unilm TOKENIZER.md's command (lines 11-32) with run_vqkd_training.py's defaults."""
    return {
        'vqkd.arch': Ref(arch, model_line),
        'vqkd.decay': Ref(0.99, _v2(RUN_VQKD, 52)),
        'vqkd.kmeans_init': Ref(True, _v2(TOK2, 24)),
        'optimizer.type': Ref('AdamW', _v2(TOK2, 27)),
        'optimizer.lr': Ref(5e-5 * 512 / 128, _v2(RUN_VQKD, '78, 252', 'lr x total batch / 128')),
        'optimizer.betas': Ref((0.9, 0.99), _v2(TOK2, 28)),
        'optimizer.eps': Ref(1e-8, _v2(RUN_VQKD, 66)),
        'optimizer.weight_decay': Ref(1e-4, _v2(TOK2, 29)),
        'clip_grad': Ref(None, _v2(RUN_VQKD, 70)),
        'total_batch': Ref(512, _v2(TOK2, '11, 26', '8 GPUs x 64')),
        'accumulate': Ref(1, _v2(RUN_VQKD, 251, 'no --update_freq')),
        'schedule.max_epochs': Ref(100, _v2(TOK2, 31)),
        'schedule.warmup': Ref(10, _v2(TOK2, 30)),
        'schedule.min_lr': Ref(1e-5, _v2(RUN_VQKD, 82)),
        # the warmup starts at 0: cosine_scheduler's start_warmup_value default (utils.py lines 530-538), not
        # --warmup_lr (line 80, never read); checked by tests/configs/test_beit2_recipes.py's schedule test
        'data.crop': Ref(224, _v2(RUN_VQKD, 57)),
        'data.rrc_scale': Ref((0.08, 1.0), _v2(TOK2, 19)),
        'data.interpolation': Ref('bicubic', _v2(TOK2, 18)),
        'data.color_jitter': Ref(None, _v2(RUN_VQKD, 91, 'default 0.')),
        'data.drop_last': Ref(True, _v2(RUN_VQKD, 222)),
        # the whole step under fp16 autocast; here the two transformers in bf16 (VQKD.autocast_dtype)
        'vqkd.autocast': Ref(True, _v2('beit2/engine_for_vqkd.py', 59, 'fp16 autocast; bf16 here')),
        'cudnn.benchmark': Ref(True, _v2(RUN_VQKD, 177, 'cudnn.benchmark = True')),
    }


RECIPES_V2: Dict[str, Dict[str, Ref]] = {
    'beit2/beitv2_beit-base-p16_8xb256-amp-coslr-1600e_in1k.py': _V2_MIM1600,
    'beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py': _V2_MIM300,
    'beit2/beitv2_beit-large-p16_8xb256-amp-coslr-1600e_in1k.py': _V2_MIM1600_L,
    'beit2/beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py': _V2_FT1600,
    'beit2/beit-base-p16_beitv2-300e-pre_8xb128-amp-coslr-100e_in1k.py': _V2_FT300,
    'beit2/beit-large-p16_beitv2-pre_8xb128-amp-coslr-50e_in1k.py': _V2_FT1600_L,
    'beit2/beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py':
        _beitv2_seg('upernet_beit_base_12_512_slide_160k_ade20k.py', False, 5e-5, 0.75),
    'beit2/beitv2-base_ft21k_upernet_8xb2-amp-160k_ade20k-512x512.py':
        _beitv2_seg('upernet_beit_base_12_512_slide_160k_21ktoade20k.py', False, 5e-5, 0.85),
    'beit2/beitv2-large_upernet_8xb2-amp-160k_ade20k-512x512.py':
        _beitv2_seg('upernet_beit_large_24_512_slide_160k_ade20k.py', True, 4e-5, 0.9),
    'beit2/beitv2-large_ft21k_upernet_8xb2-amp-160k_ade20k-512x512.py':
        _beitv2_seg('upernet_beit_large_24_512_slide_160k_21ktoade20k.py', True, 3e-5, 0.9),
    'vqkd/vqkd-base-p16-dec3x_clip-b16_8xb64-amp-coslr-100e_in1k.py':
        _vqkd('base_decoder_3x_clip', _v2(TOK2, 20)),
    'vqkd/vqkd-base-p16-dec1x_clip-b16_8xb64-amp-coslr-100e_in1k.py':
        _vqkd('base_decoder_1x_clip', _v2(TOK2, 48, 'model zoo: decoder 1x768x12, CLIP')),
    'vqkd/vqkd-base-p16-dec1x_dino-b16_8xb64-amp-coslr-100e_in1k.py':
        _vqkd('base_decoder_1x_dino', _v2(TOK2, 50, 'model zoo: decoder 1x768x12, DINO')),
}

# ------------------------------------------------------------------------- Mask2Former (configs/mask2former/)
# ViT-Adapter's Mask2Former BEiT recipe (czczup/ViT-Adapter@fd64a51 segmentation/) for the BEiT-B config: the ADE20K
# BEiT-L 640 config (M2F_A) for data, schedule and test; its BEiT-B Mask2Former config (M2F_C, COCO-Stuff-10k) for the
# BEiT-B sizes, lr, layer decay, drop path and head width. mmseg v1.2.2's Swin-T Mask2Former (M2F_S on M2F_M, read
# from the mmsegmentation 1.2.2 wheel's mmseg/.mim/configs) for the CvT-13 config.
VIT_ADAPTER = 'czczup/ViT-Adapter@fd64a51'
M2F_A = 'segmentation/configs/ade20k/mask2former_beit_adapter_large_640_160k_ade20k_ss.py'
M2F_C = 'segmentation/configs/coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py'
M2F_BASE = 'segmentation/configs/_base_/models/mask2former_beit.py'
M2F_SCHEDULE = 'segmentation/configs/_base_/schedules/schedule_160k.py'
M2F_LD = 'segmentation/mmcv_custom/layer_decay_optimizer_constructor.py'
MMSEG122 = 'open-mmlab/mmsegmentation@v1.2.2'
M2F_M = 'configs/mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py'
M2F_S = 'configs/mask2former/mask2former_swin-t_8xb2-160k_ade20k-512x512.py'
M2F_D = 'configs/_base_/datasets/ade20k.py'


def _m2f_head(repo: str, path: str, lines: Dict[str, Any], loss_repo: str, loss_path: str,
              loss_lines: Dict[str, Any]) -> Dict[str, Ref]:
    """The Mask2Former head's structure (``path``) and loss (``loss_path``) at their lines."""
    def at(key: str) -> str:
        return _src(repo, path, lines[key])

    def loss_at(key: str) -> str:
        return _src(loss_repo, loss_path, loss_lines[key])
    return {
        'head.feat_channels': Ref(256, at('feat_channels')),
        'head.out_channels': Ref(256, at('out_channels')),
        'head.num_queries': Ref(100, at('num_queries')),
        'head.num_outs': Ref(3, at('num_outs')),
        'head.enc_layers': Ref(6, at('enc_layers')),
        'head.enc_heads': Ref(8, at('enc_heads')),
        'head.enc_points': Ref(4, at('enc_points')),
        'head.enc_ffn': Ref(1024, at('enc_ffn')),
        'head.pos_feats': Ref(128, at('pos_feats')),
        'head.dec_layers': Ref(9, at('dec_layers')),
        'head.dec_heads': Ref(8, at('dec_heads')),
        'head.dec_ffn': Ref(2048, at('dec_ffn')),
        'loss.cls_weight': Ref(2.0, loss_at('cls')),
        'loss.no_object_weight': Ref(0.1, loss_at('no_object')),
        'loss.mask_weight': Ref(5.0, loss_at('mask')),
        'loss.dice_weight': Ref(5.0, loss_at('dice')),
        'loss.num_points': Ref(12544, loss_at('points')),
        'loss.oversample_ratio': Ref(3.0, loss_at('oversample')),
        'loss.importance_sample_ratio': Ref(0.75, loss_at('importance')),
        'loss.match_costs': Ref((2.0, 5.0, 5.0), loss_at('costs')),
    }


def _va(path: str, line: Any, note: str = '') -> str:
    return _src(VIT_ADAPTER, path, line, note)


_M2F_BEIT_B640 = {
    **_m2f_head(VIT_ADAPTER, M2F_C, dict(feat_channels=35, out_channels=36, num_queries=37, num_outs=40, enc_layers=45,
                                         enc_heads=51, enc_points=53, enc_ffn=62, pos_feats='69,72', dec_layers=76,
                                         dec_heads=82, dec_ffn=89),
                VIT_ADAPTER, M2F_BASE, dict(cls=96, no_object=98, mask=103, dice=111, points=113, oversample=114,
                                            importance=115, costs='118-122')),
    'model.img_size': Ref(640, _va(M2F_A, 15)),
    'model.drop_path': Ref(0.2, _va(M2F_C, 25, 'BEiT-B; BEiT-L 0.3 at M2F_A:25')),
    'model.layer_scale': Ref(1e-6, _va(M2F_A, 24)),
    'model.abs_pos_emb': Ref(False, _va(M2F_C, 22)),
    'model.rel_pos_bias': Ref(True, _va(M2F_C, 23)),
    'decode.in_channels': Ref([768] * 4, _va(M2F_C, 34)),
    'optimizer.type': Ref('AdamW', _va(M2F_C, 134)),
    'optimizer.lr': Ref(3e-5, _va(M2F_C, 134, 'BEiT-B; BEiT-L 2e-5 at M2F_A:137')),
    'optimizer.betas': Ref((0.9, 0.999), _va(M2F_C, 134)),
    'optimizer.weight_decay': Ref(0.05, _va(M2F_A, 137)),
    'layer_decay': Ref(0.95, _va(M2F_C, 136, 'BEiT-B; BEiT-L 0.90 at M2F_A:139')),
    'clip_grad': Ref(None, _va(M2F_SCHEDULE, 3, 'optimizer_config = dict()')),
    'schedule.max_iters': Ref(160000, _va(M2F_SCHEDULE, 7)),
    'schedule.warmup': Ref(1500, _va(M2F_A, 143)),
    'schedule.warmup_start': Ref(1e-6, _va(M2F_A, 144)),
    'schedule.poly_power': Ref(1.0, _va(M2F_A, 145)),
    'schedule.min_lr': Ref(0.0, _va(M2F_A, 145)),
    'accumulate': Ref(1, _va(M2F_A, 146, 'no update interval')),
    'total_batch': Ref(16, _va(M2F_A, 146, '2 per GPU x 8 GPUs, segmentation/README.md:123')),
    'data.mean': Ref(IMAGENET_MEAN, _va(M2F_A, 107)),
    'data.std': Ref(IMAGENET_STD, _va(M2F_A, 107)),
    'data.train_scale': Ref((2048, 640), _va(M2F_A, 111)),
    'data.ratio_range': Ref((0.5, 2.0), _va(M2F_A, 111)),
    'data.crop': Ref((640, 640), _va(M2F_A, '8,112')),
    'data.cat_max_ratio': Ref(0.75, _va(M2F_A, 112)),
    'data.flip': Ref(0.5, _va(M2F_A, 113)),
    'eval.mode': Ref('slide', _va(M2F_A, 103)),
    'eval.crop': Ref((640, 640), _va(M2F_A, 103)),
    'eval.stride': Ref((426, 426), _va(M2F_A, 103)),
    'eval.test_scale': Ref((2048, 640), _va(M2F_A, 125)),
    'eval.size_divisor': Ref(32, _va(M2F_A, 130, 'ResizeToMultiple')),
    'eval.interval': Ref(16000, _va(M2F_A, 152)),
    **_fp32(_va(M2F_A, 150, 'runner IterBasedRunner') + '; '
            + _va(M2F_SCHEDULE, 3, 'optimizer_config = dict(): no fp16')),
    # segmentation/dist_train.sh:9 passes --deterministic: train.py:167 (mmseg 0.x set_random_seed) sets
    # cudnn.deterministic = True, cudnn.benchmark = False after train.py:107-108 set the config's True
    'cudnn.benchmark': Ref(False, _va('segmentation/dist_train.sh', 9, '--deterministic') + '; '
                           + _va('segmentation/train.py', '107-108, 167')),
    'cudnn.deterministic': Ref(True, _va('segmentation/dist_train.sh', 9, '--deterministic') + '; '
                               + _va('segmentation/train.py', 167)),
}


def _mm(path: str, line: Any, note: str = '') -> str:
    return _src(MMSEG122, path, line, note)


_M2F_CVT13 = {
    **_m2f_head(MMSEG122, M2F_M, dict(feat_channels=33, out_channels=34, num_queries=36, num_outs=41, enc_layers=45,
                                      enc_heads=49, enc_points=51, enc_ffn=59, pos_feats='65,69', dec_layers=72,
                                      dec_heads=76, dec_ffn=90),
                MMSEG122, M2F_M, dict(cls=100, no_object=102, mask=107, dice=115, points=117, oversample=118,
                                      importance=119, costs='123-132')),
    'model.depths': Ref([1, 2, 10], _src(CVT, 'experiments/imagenet/cvt/cvt-13-224x224.yaml', 17)),
    'optimizer.type': Ref('AdamW', _mm(M2F_M, 157)),
    'optimizer.lr': Ref(1e-4, _mm(M2F_M, 157)),
    'optimizer.betas': Ref((0.9, 0.999), _mm(M2F_M, 157)),
    'optimizer.eps': Ref(1e-8, _mm(M2F_M, 157)),
    'optimizer.weight_decay': Ref(0.05, _mm(M2F_M, 157)),
    'clip_grad': Ref(dict(max_norm=0.01, norm_type=2), _mm(M2F_M, 161)),
    'paramwise.backbone_lr_mult': Ref(0.1, _mm(M2F_S, 32)),
    'paramwise.backbone_norm': Ref(dict(lr_mult=0.1, decay_mult=0.0), _mm(M2F_S, 28)),
    'paramwise.backbone_embed': Ref(dict(lr_mult=0.1, decay_mult=0.0), _mm(M2F_S, 29)),
    'paramwise.query_level_embed': Ref(dict(lr_mult=1.0, decay_mult=0.0), _mm(M2F_M, '155,165-167')),
    'paramwise.norm_decay_mult': Ref(0.0, _mm(M2F_M, 169)),
    'schedule.max_iters': Ref(160000, _mm(M2F_M, 183)),
    'schedule.poly_power': Ref(0.9, _mm(M2F_M, 175)),
    'schedule.min_lr': Ref(0.0, _mm(M2F_M, 174)),
    'schedule.warmup': Ref(0, _mm(M2F_M, '171-179', 'PolyLR only')),
    'accumulate': Ref(1, _mm(M2F_M, 159, 'plain OptimWrapper')),
    'total_batch': Ref(16, _mm(M2F_M, '152,199', '2 per GPU x 8 GPUs')),
    'data.mean': Ref(IMAGENET_MEAN, _mm(M2F_M, 8)),
    'data.std': Ref(IMAGENET_STD, _mm(M2F_M, 9)),
    'data.short_edge_scales': Ref([int(512 * x * 0.1) for x in range(5, 21)], _mm(M2F_M, 144)),
    'data.max_size': Ref(2048, _mm(M2F_M, 146)),
    'data.crop': Ref((512, 512), _mm(M2F_M, 5)),
    'data.cat_max_ratio': Ref(0.75, _mm(M2F_M, 147)),
    'data.flip': Ref(0.5, _mm(M2F_M, 148)),
    'eval.test_scale': Ref((2048, 512), _mm(M2F_D, 20)),
    'eval.interval': Ref(5000, _mm(M2F_M, 183)),
    **_fp32(_mm(M2F_M, 159, 'plain OptimWrapper, no AmpOptimWrapper')),
    # M:1 inherits _base_/default_runtime.py; mmseg 1.x tools/train.py sets no --deterministic
    'cudnn.benchmark': Ref(True, _mm('configs/_base_/default_runtime.py', 3, 'env_cfg cudnn_benchmark=True')),
    'cudnn.deterministic': Ref(False, _mm(M2F_M, 1, 'no randomness / deterministic setting')),
}

RECIPES_M2F: Dict[str, Dict[str, Ref]] = {
    'mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py': _M2F_BEIT_B640,
    'mask2former/mask2former_cvt-13_8xb2-160k_ade20k-512x512.py': _M2F_CVT13,
}

# the published metric of each BEiT v2 fine-tuning config (its header states it): unilm's model zoo tables
PUBLISHED_V2: Dict[str, Ref] = {
    'beit2/beit-base-p16_beitv2-pre_8xb128-amp-coslr-100e_in1k.py': Ref(85.5, _v2('beit2/README.md', 67, 'top-1')),
    'beit2/beit-base-p16_beitv2-300e-pre_8xb128-amp-coslr-100e_in1k.py': Ref(85.0, _v2(FT2, 9, 'top-1')),
    'beit2/beit-large-p16_beitv2-pre_8xb128-amp-coslr-50e_in1k.py': Ref(87.3, _v2('beit2/README.md', 69, 'top-1')),
    'beit2/beitv2-base_upernet_8xb2-amp-160k_ade20k-512x512.py': Ref(53.1, _v2('beit2/README.md', 78, 'mIoU')),
    'beit2/beitv2-base_ft21k_upernet_8xb2-amp-160k_ade20k-512x512.py': Ref(53.5, _v2('beit2/README.md', 79, 'mIoU')),
    'beit2/beitv2-large_upernet_8xb2-amp-160k_ade20k-512x512.py': Ref(56.7, _v2('beit2/README.md', 80, 'mIoU')),
    'beit2/beitv2-large_ft21k_upernet_8xb2-amp-160k_ade20k-512x512.py': Ref(57.5, _v2('beit2/README.md', 81, 'mIoU')),
}


def ref(config: str, key: str) -> Any:
    """The published value of ``key`` for ``config`` (a path under configs/, e.g. 'beit/beit-...py')."""
    return RECIPES[config][key].value


def find(config_basename: str) -> Optional[str]:
    """The RECIPES key of a config file name."""
    matches = [k for k in RECIPES if k.endswith('/' + config_basename)]
    return matches[0] if matches else None


# ---- EoMT COCO panoptic / instance (tests/configs/test_eomt_coco_configs.py) ------------------------------------------------
# tue-mps/eomt @ 7bd19ddd621c5c6adedcd260458a34783cd4a45f; the yaml files are the LightningCLI configs of the
# published runs, the task modules' __init__ defaults fill what the yaml leaves out. COCO's own image counts (the
# dataset, not the repository) are given with the file they are counted from.
EOMT = 'tue-mps/eomt@7bd19dd'
_PAN = 'configs/dinov2/coco/panoptic/eomt_large_{}.yaml'
_INS = 'configs/dinov2/coco/instance/eomt_large_{}.yaml'
_PAN_TASK = 'training/mask_classification_panoptic.py'
_INS_TASK = 'training/mask_classification_instance.py'


def _eo(path: str, line: Any, note: str = '') -> str:
    return _src(EOMT, path, line, note)


def _eomt_coco(task: str, size: int) -> Dict[str, Ref]:
    yaml = (_PAN if task == 'panoptic' else _INS).format(size)
    module = _PAN_TASK if task == 'panoptic' else _INS_TASK
    data = f'datasets/coco_{task}.py'
    off = 0 if task == 'panoptic' else 1  # the instance yaml has check_val_every_n_epoch on line 3
    recipe = {
        'max_epochs': Ref(12, _eo(yaml, 2)),
        'val_every_epochs': Ref(1 if task == 'panoptic' else 2,
                                _eo(yaml, 3, 'check_val_every_n_epoch') if task == 'instance' else
                                _eo(yaml, '1-8', "no check_val_every_n_epoch: Lightning's 1")),
        'anneal_start': Ref([14782, 29564, 44346, 59128], _eo(yaml, 13 + off)),
        'anneal_end': Ref([29564, 44346, 59128, 73910], _eo(yaml, 14 + off)),
        'num_queries': Ref(200, _eo(yaml, 18 + off)),
        'num_blocks': Ref(4, _eo('models/eomt.py', 24, 'num_blocks default; the yaml sets none')),
        'img_size': Ref(size, _eo(yaml, 24 if task == 'panoptic' else 25, 'img_size') if size != 640 else
                        _eo(data, 159 if task == 'panoptic' else 108, 'img_size default')),
        'num_classes': Ref(133 if task == 'panoptic' else 80, _eo(data, 160 if task == 'panoptic' else 109)),
        'scale_range': Ref((0.1, 2.0), _eo(data, 162 if task == 'panoptic' else 111)),
        'color_jitter': Ref(False, _eo(data, 161 if task == 'panoptic' else 110)),
        'flip': Ref(0.5, _eo('datasets/transforms.py', 37, 'T.RandomHorizontalFlip(), p=0.5')),
        'drop_last': Ref(True, _eo(data, 234 if task == 'panoptic' else 184)),
        'lr': Ref(1e-4, _eo(module, 25 if task == 'panoptic' else 28)),
        'llrd': Ref(0.8, _eo(module, 26 if task == 'panoptic' else 29)),
        'llrd_l2_enabled': Ref(True, _eo(module, 27 if task == 'panoptic' else 30)),
        'weight_decay': Ref(0.05, _eo(module, 29 if task == 'panoptic' else 32)),
        'points': Ref((12544, 3.0, 0.75), _eo(module, '30-32' if task == 'panoptic' else '33-35')),
        'poly_power': Ref(0.9, _eo(module, 33 if task == 'panoptic' else 36)),
        'warmup_steps': Ref((500, 1000), _eo(module, 34 if task == 'panoptic' else 37)),
        'loss_weights': Ref((0.1, 5.0, 5.0, 2.0), _eo(module, '35-38' if task == 'panoptic' else '38-41',
                                                       'no-object, mask, dice, class')),
        'mask_thresh': Ref(0.8, _eo(module, 39 if task == 'panoptic' else 42)),
        'overlap_thresh': Ref(0.8, _eo(module, 40 if task == 'panoptic' else 43)),
        'grad_clip': Ref(0.01, _eo('main.py', '176-177', 'gradient_clip_val, norm')),
        'seed': Ref(0, _eo('main.py', 167)),
        'total_batch': Ref(16, _eo('README.md', '124-131', '4 devices x batch_size 4 = 16')),
    }
    recipe.update(_amp(_eo('main.py', 169, 'trainer precision "16-mixed"')))
    if task == 'panoptic':
        recipe['stuff_classes'] = Ref(list(range(80, 133)), _eo(yaml, 24 if size == 640 else 25))
        # the annealing unit U (the first start) is a sixth of the run in the official configs (ADE20K 6520 of 39153
        # steps): 6 U = the run's steps; the panoptic train2017 images with a segment are not countable offline
        recipe['steps_per_epoch'] = Ref(6 * 14782 // 12, _eo(yaml, 13, '6 U / 12 epochs'))
    else:
        recipe['top_k_instances'] = Ref(100, _eo(module, 44))
        # instances_train2017.json: 118287 images, 117266 of them with an annotation (what datasets/dataset.py:86-103
        # keeps); floor(117266 / 16) with drop_last
        recipe['steps_per_epoch'] = Ref(117266 // 16, 'COCO instances_train2017.json (117266 annotated images) / 16')
    return recipe


_EOMT_COCO = 'eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-{}-{}x{}.py'
RECIPES_EOMT_COCO: Dict[str, Dict[str, Ref]] = {
    _EOMT_COCO.format(task, size, size): _eomt_coco(task, size)
    for task in ('panoptic', 'instance') for size in (640, 1280)
}

# the published metric of each (model_zoo/dinov2.md rows; PQ on COCO panoptic val2017, mask AP via pycocotools)
PUBLISHED_EOMT_COCO: Dict[str, Ref] = {
    _EOMT_COCO.format('panoptic', 640, 640): Ref(56.0, _eo('model_zoo/dinov2.md', 50, 'PQ')),
    _EOMT_COCO.format('panoptic', 1280, 1280): Ref(58.3, _eo('model_zoo/dinov2.md', 91, 'PQ')),
    _EOMT_COCO.format('instance', 640, 640): Ref(45.2, _eo('model_zoo/dinov2.md', '216,239', 'mask AP, pycocotools')),
    _EOMT_COCO.format('instance', 1280, 1280): Ref(48.8, _eo('model_zoo/dinov2.md', '234,239',
                                                             'mask AP, pycocotools')),
}

_ADE_PAN = 'configs/dinov2/ade20k/panoptic/eomt_large_640.yaml'
_ADE_PAN_DATA = 'datasets/ade20k_panoptic.py'


def _eomt_ade20k_panoptic() -> Dict[str, Ref]:
    """The official ADE20K panoptic EoMT-L 640: the panoptic task module's values (as the COCO panoptic recipe: the
    same module and main.py), the ADE20K yaml's and data module's own."""
    recipe = _eomt_coco('panoptic', 640)
    recipe.update({
        'max_epochs': Ref(31, _eo(_ADE_PAN, 2)),
        'val_every_epochs': Ref(1, _eo(_ADE_PAN, '1-8', "no check_val_every_n_epoch: Lightning's 1")),
        'anneal_start': Ref([6520, 13040, 19560, 26080], _eo(_ADE_PAN, 13)),
        'anneal_end': Ref([13040, 19560, 26080, 32600], _eo(_ADE_PAN, 14)),
        'num_queries': Ref(200, _eo(_ADE_PAN, 18)),
        'img_size': Ref(640, _eo(_ADE_PAN_DATA, 130, 'img_size default')),
        'num_classes': Ref(150, _eo(_ADE_PAN_DATA, 131)),
        'color_jitter': Ref(True, _eo(_ADE_PAN_DATA, 132, 'color_jitter_enabled default; the yaml sets none')),
        'scale_range': Ref((0.1, 2.0), _eo(_ADE_PAN_DATA, 133)),
        'drop_last': Ref(True, _eo(_ADE_PAN_DATA, 222)),
        'stuff_classes': Ref([0, 1, 2, 3, 4, 5, 6, 9, 11, 13, 16, 17, 21, 25, 26, 28, 29, 34, 40, 46, 48, 51, 52, 54, 59,
                              60, 61, 63, 68, 77, 79, 84, 91, 94, 96, 99, 100, 101, 105, 106, 109, 113, 114, 117, 122,
                              128, 131, 140, 141, 145], _eo(_ADE_PAN, 24)),
        # ADEChallengeData2016: 20210 training images; batches of 16 with drop_last (as the ADE20K semantic configs)
        'steps_per_epoch': Ref(20210 // 16, 'ADEChallengeData2016/images/training: 20210 images / 16, drop_last'),
    })
    return recipe


RECIPES_EOMT_ADE20K_PANOPTIC: Dict[str, Dict[str, Ref]] = {
    'eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-31e_ade20k-panoptic-640x640.py': _eomt_ade20k_panoptic(),
}
# model_zoo/dinov2.md's ADE20K panoptic row (PQ on ADE20K val; "C": pre-trained on COCO panoptic, line 155)
PUBLISHED_EOMT_ADE20K_PANOPTIC: Dict[str, Ref] = {
    'eomt/eomt_dinov2-large-reg4-p16_4xb4-amp-31e_ade20k-panoptic-640x640.py': Ref(50.6, _eo('model_zoo/dinov2.md', 118,
                                                                                              'PQ')),
}

# ---- EoMT on DINOv3 (tests/configs/test_eomt_dinov3_configs.py) ----------------------------------------------------
# tue-mps/eomt @ 7bd19dd configs/dinov3/**.yaml over the task modules' defaults; every value a DINOv3 yaml does not set
# is the DINOv2 run's of the same task (the COCO recipe above; ADE20K semantic: the semantic module and data module).
_D3_ADE = 'configs/dinov3/ade20k/semantic/eomt_large_512.yaml'
_D3_PAN = 'configs/dinov3/coco/panoptic/eomt_{}.yaml'
_D3_INS = 'configs/dinov3/coco/instance/eomt_{}.yaml'
_SEM_TASK = 'training/mask_classification_semantic.py'
_LLRD_L2 = 'llrd_l2_enabled: False, training/lightning_module.py:136-141'
# the transformers DINOv3 each yaml's models.vit.ViT loads (models/vit.py:27-33) -> beit_mm.DINOv3 arch
DINOV3_HF_NAMES = {'small': 'facebook/dinov3-vits16-pretrain-lvd1689m',
                   'base': 'facebook/dinov3-vitb16-pretrain-lvd1689m',
                   'large': 'facebook/dinov3-vitl16-pretrain-lvd1689m'}


def _eomt_dinov3_ade20k() -> Dict[str, Ref]:
    y = _D3_ADE
    recipe = {
        'max_epochs': Ref(16, _eo(y, 2)),
        'steps_per_epoch': Ref(20210 // 16, 'ADEChallengeData2016/images/training: 20210 images / 16, drop_last'),
        'anneal_start': Ref([0, 6520, 9780, 13040], _eo(y, 13)),
        'anneal_end': Ref([3000, 9780, 13040, 16300], _eo(y, 14)),
        'lr': Ref(2e-4, _eo(y, 15)),
        # lr_mult 0.1 (line 16) multiplies nothing (the elif at lightning_module.py:130 is unreachable); != 1 it gives
        # the last L2 blocks the full lr (:136-141), as llrd_l2_enabled False
        'llrd_l2_enabled': Ref(False, _eo(y, 16, 'lr_mult: 0.1 != 1.0, training/lightning_module.py:136-141')),
        'llrd': Ref(1.0, _eo(y, 17)),
        'warmup_steps': Ref((2000, 3000), _eo(y, 18)),
        'num_queries': Ref(100, _eo(y, 23)),
        'backbone': Ref(DINOV3_HF_NAMES['large'], _eo(y, 27)),
        'num_blocks': Ref(4, _eo('models/eomt.py', 24, 'num_blocks default; the yaml sets none')),
        'img_size': Ref(512, _eo('datasets/ade20k_semantic.py', 24, 'img_size default')),
        'weight_decay': Ref(0.05, _eo(_SEM_TASK, 29)),
        'points': Ref((12544, 3.0, 0.75), _eo(_SEM_TASK, '30-32')),
        'poly_power': Ref(0.9, _eo(_SEM_TASK, 33)),
        'loss_weights': Ref((0.1, 5.0, 5.0, 2.0), _eo(_SEM_TASK, '35-38', 'no-object, mask, dice, class')),
        'grad_clip': Ref(0.01, _eo('main.py', '176-177', 'gradient_clip_val, norm')),
        'seed': Ref(0, _eo('main.py', 167)),
        'total_batch': Ref(16, _eo('README.md', '124-131', '4 devices x batch_size 4 = 16')),
    }
    recipe.update(_amp(_eo('main.py', 169, 'trainer precision "16-mixed"')))
    return recipe


def _eomt_dinov3_coco(task: str, name: str) -> Dict[str, Ref]:
    """``name``: the yaml's stem (large_640, large_1280, small_640_2x, base_640_2x)."""
    size = 1280 if '1280' in name else 640
    recipe = _eomt_coco(task, 640)
    y = (_D3_PAN if task == 'panoptic' else _D3_INS).format(name)
    two_x = name.endswith('_2x')
    o = 1 if task == 'instance' else 0  # check_val_every_n_epoch on line 3
    b = 1 if two_x else 0  # num_blocks on line 23 of the 2x yamls
    arch = name.split('_')[0]
    recipe.update({
        'max_epochs': Ref(24 if two_x else 12, _eo(y, 2)),
        'anneal_start': Ref([0, 73910, 118256] if two_x else [14782, 29564, 44346, 59128] if task == 'instance'
                            else [0, 29564, 44346, 59128], _eo(y, 13 + o)),
        'anneal_end': Ref([3000, 103474, 147820] if two_x else [29564, 44346, 59128, 73910] if task == 'instance'
                          else [3000, 44346, 59128, 73910], _eo(y, 14 + o)),
        'lr': Ref(2e-4, _eo(y, 15 + o)),
        'llrd_l2_enabled': Ref(False, _eo(y, 16 + o)),
        'warmup_steps': Ref((2000, 3000), _eo(y, 17 + o)),
        'num_queries': Ref(200, _eo(y, 22 + o)),
        'backbone': Ref(DINOV3_HF_NAMES[arch], _eo(y, 26 + o + b)),
    })
    if two_x:
        recipe['num_blocks'] = Ref(3, _eo(y, 23))
    if task == 'panoptic':
        recipe['stuff_classes'] = Ref(list(range(80, 133)), _eo(y, 30 + b))
    if size == 1280:  # the yaml sets no img_size (the DINOv2 one does): the model zoo's input size of the published run
        row = 43 if task == 'panoptic' else 98
        recipe['img_size'] = Ref(1280, _eo('model_zoo/dinov3.md', row, 'input size; the yaml sets no img_size'))
    return recipe


_EOMT_D3 = 'eomt/eomt_dinov3-{}-p16_4xb4-amp-{}_{}-{}x{}.py'
RECIPES_EOMT_DINOV3: Dict[str, Dict[str, Ref]] = {
    _EOMT_D3.format('large', '16e', 'ade20k', 512, 512): _eomt_dinov3_ade20k(),
    _EOMT_D3.format('small', '24e', 'coco-panoptic', 640, 640): _eomt_dinov3_coco('panoptic', 'small_640_2x'),
    _EOMT_D3.format('base', '24e', 'coco-panoptic', 640, 640): _eomt_dinov3_coco('panoptic', 'base_640_2x'),
    _EOMT_D3.format('large', '12e', 'coco-panoptic', 640, 640): _eomt_dinov3_coco('panoptic', 'large_640'),
    _EOMT_D3.format('large', '12e', 'coco-panoptic', 1280, 1280): _eomt_dinov3_coco('panoptic', 'large_1280'),
    _EOMT_D3.format('large', '12e', 'coco-instance', 640, 640): _eomt_dinov3_coco('instance', 'large_640'),
    _EOMT_D3.format('large', '12e', 'coco-instance', 1280, 1280): _eomt_dinov3_coco('instance', 'large_1280'),
}
# model_zoo/dinov3.md's rows (mIoU on ADE20K val, PQ on COCO panoptic val2017, mask AP on COCO val2017)
PUBLISHED_EOMT_DINOV3: Dict[str, Ref] = {
    _EOMT_D3.format('large', '16e', 'ade20k', 512, 512): Ref(59.5, _eo('model_zoo/dinov3.md', 69, 'mIoU')),
    _EOMT_D3.format('small', '24e', 'coco-panoptic', 640, 640): Ref(47.2, _eo('model_zoo/dinov3.md', 24, 'PQ')),
    _EOMT_D3.format('base', '24e', 'coco-panoptic', 640, 640): Ref(53.1, _eo('model_zoo/dinov3.md', 31, 'PQ')),
    _EOMT_D3.format('large', '12e', 'coco-panoptic', 640, 640): Ref(56.8, _eo('model_zoo/dinov3.md', 38, 'PQ')),
    _EOMT_D3.format('large', '12e', 'coco-panoptic', 1280, 1280): Ref(58.9, _eo('model_zoo/dinov3.md', 45, 'PQ')),
    _EOMT_D3.format('large', '12e', 'coco-instance', 640, 640): Ref(45.9, _eo('model_zoo/dinov3.md', 93, 'mask AP')),
    _EOMT_D3.format('large', '12e', 'coco-instance', 1280, 1280): Ref(49.9, _eo('model_zoo/dinov3.md', 100,
                                                                              'mask AP')),
}
