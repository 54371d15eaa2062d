"""The full-size EoMT configs against the official EoMT recipe, written here with its source (github.com/tue-mps/eomt
at 7bd19ddd621c5c6adedcd260458a34783cd4a45f, path:line), and a 2-iteration narrowed training run of each through
tools/train.py from a random unilm pretrained-layout checkpoint."""
import glob
import math
import os
import re

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.models.backbones import BEiT

from ..conftest import ROOT, narrow_beit, run_train, shrink_seg_config

# ADE20K semantic; COCO: test_eomt_coco_configs.py, ADE20K panoptic: test_eomt_ade20k_panoptic_config.py
CONFIGS = sorted(set(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*ade20k*.py')))
                 - set(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*ade20k-panoptic*.py')))
                 - set(glob.glob(os.path.join(ROOT, 'configs', 'eomt', '*dinov3*.py'))))  # test_eomt_dinov3_configs.py
BASE, LARGE = 'eomt_beit-base_4xb4-amp-39k_ade20k-512x512.py', 'eomt_beit-large_4xb4-amp-39k_ade20k-640x640.py'
V2 = 'eomt_beitv2-base_4xb4-amp-39k_ade20k-512x512.py'
DINO = 'eomt_dinov2-large-reg4-p16_4xb4-amp-39k_ade20k-512x512.py'

# ---- official values (tue-mps/eomt @ 7bd19dd) ----------------------------------------------------------------------
SEM = 'training/mask_classification_semantic.py'
LR = 1e-4  # SEM:25
LLRD = 0.8  # SEM:26
LLRD_L2_ENABLED = True  # SEM:27
WEIGHT_DECAY = 0.05  # SEM:29 (every parameter: training/lightning_module.py:152, no per-group value)
NUM_POINTS, OVERSAMPLE_RATIO, IMPORTANCE_SAMPLE_RATIO = 12544, 3.0, 0.75  # SEM:30-32
POLY_POWER = 0.9  # SEM:33 (lr and mask annealing: lightning_module.py:209)
WARMUP_STEPS = (500, 1000)  # SEM:34
NO_OBJECT, MASK, DICE, CLASS = 0.1, 5.0, 5.0, 2.0  # SEM:35-38
ADAMW_BETAS, ADAMW_EPS = (0.9, 0.999), 1e-8  # lightning_module.py:152 AdamW(param_groups, weight_decay=...): torch's
GRAD_CLIP = 0.01  # main.py:176 gradient_clip_val, :177 gradient_clip_algorithm 'norm'
SEED = 0  # main.py:167 seed_everything_default
# main.py:169 trainer precision "16-mixed": fp16 autocast with Lightning's GradScaler (dynamic loss scaling);
# beit_mm: AmpOptimWrapper(dtype='auto'), bf16 where the GPU has it, else fp16 with loss_scale 'dynamic'
PRECISION = dict(amp=True, dtype='auto', loss_scale='dynamic')
# main.py:168-178 trainer_defaults set no `benchmark` (nor does any config): Lightning 2.5.1 (requirements.txt:6)
# then leaves torch's default, cudnn.benchmark = False; no `deterministic` either
CUDNN_BENCHMARK, CUDNN_DETERMINISTIC = False, False
TOTAL_BATCH, GPUS = 16, 4  # README.md:124-125 (--trainer.devices 4, --data.batch_size 4), :131 "= 16"
MAX_EPOCHS = 31  # configs/dinov2/ade20k/semantic/eomt_large_512.yaml:2
NUM_QUERIES = 100  # eomt_large_512.yaml:18
ADE_ANNEAL_START = [6520, 13040, 19560, 26080]  # eomt_large_512.yaml:13 (4 blocks, the default: models/eomt.py:24)
ADE_ANNEAL_END = [13040, 19560, 26080, 32600]  # eomt_large_512.yaml:14
VIT_B_NUM_BLOCKS = 3  # configs/dinov2/coco/panoptic/eomt_base_640.yaml:19
VIT_L_NUM_BLOCKS = 4  # models/eomt.py:24 (eomt_large_512.yaml sets none)
COCO_B_ANNEAL_START = [14782, 36955, 59128]  # eomt_base_640.yaml:13 (3 blocks)
COCO_B_ANNEAL_END = [29564, 51737, 73910]  # eomt_base_640.yaml:14
COCO_L_ANNEAL_START = [14782, 29564, 44346, 59128]  # configs/dinov2/coco/panoptic/eomt_large_640.yaml:13 (same 12
#                                                     epochs as eomt_base_640.yaml:2, so the same unit)
IMG_SIZE = 512  # datasets/ade20k_semantic.py:24
NUM_CLASSES = 150  # datasets/ade20k_semantic.py:25; labels 1..150 -> 0..149, others ignored (:15, :50-57)
SCALE_RANGE = (0.5, 2.0)  # datasets/ade20k_semantic.py:27 -> torchvision ScaleJitter (datasets/transforms.py:38)
DROP_LAST = True  # datasets/ade20k_semantic.py:94
BRIGHTNESS, CONTRAST, SATURATION, HUE = 32, 0.5, 0.5, 18  # datasets/transforms.py:23-26 (hue in 1/360 turns, :35)
IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]  # models/vit.py:41 (on x / 255, lightning_module.py:172)
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]  # models/vit.py:42
# the official ViT-L (models/vit.py:19-20: timm vit_large_patch14_reg4_dinov2 built with patch_size=16): timm 1.0.31
# timm/models/vision_transformer.py, vit_large_patch14_reg4_dinov2: embed_dim=1024, depth=24, num_heads=16,
# reg_tokens=4, no_embed_class=True (position embeddings for the patches only), init_values (layer scale) set
DINO_L = dict(embed_dims=1024, num_layers=24, num_heads=16, patch_size=16, num_register_tokens=4)
ADE20K_TRAIN_IMAGES = 20210  # ADEChallengeData2016 images/training (the dataset, not the EoMT repository)


def official_windows(long_side: int, img_size: int) -> list[int]:
    """Window starts along the longer side of an image whose shorter side is ``img_size``
    (``training/lightning_module.py:622-635``)."""
    num_crops = math.ceil(long_side / img_size)
    overlap = num_crops * img_size - long_side
    overlap_per_crop = (overlap / (num_crops - 1)) if overlap > 0 else 0
    return [int(j * (img_size - overlap_per_crop)) for j in range(num_crops)]


def mmseg_windows(length: int, crop: int, stride: int) -> list[int]:
    """mmseg 1.2.2 ``EncoderDecoder.slide_inference`` (``mmseg/models/segmentors/encoder_decoder.py:266-277``): grids
    ``max(L - crop + stride - 1, 0) // stride + 1``, start ``max(min(i * stride + crop, L) - crop, 0)``."""
    grids = max(length - crop + stride - 1, 0) // stride + 1
    return [max(min(i * stride, length - crop), 0) for i in range(grids)]


def load(name: str) -> Config:
    return Config.fromfile(os.path.join(ROOT, 'configs', 'eomt', name))


def test_every_full_size_config_is_checked():
    assert sorted(map(os.path.basename, CONFIGS)) == sorted([BASE, LARGE, V2, DINO])


@pytest.mark.parametrize('name', [BASE, V2, LARGE, DINO])
def test_optimizer_schedule_and_batch_are_the_official(name):
    cfg = load(name)
    ow = cfg.optim_wrapper
    assert ow.optimizer.type == 'AdamW' and ow.optimizer.lr == LR and ow.optimizer.weight_decay == WEIGHT_DECAY
    assert tuple(ow.optimizer.betas) == ADAMW_BETAS and ow.optimizer.eps == ADAMW_EPS
    assert ow.constructor == 'beit_mm.EoMTLayerDecayOptimWrapperConstructor'
    assert ow.paramwise_cfg == dict(layer_decay_rate=LLRD, llrd_l2_enabled=LLRD_L2_ENABLED)
    assert ow.clip_grad == dict(max_norm=GRAD_CLIP, norm_type=2)
    assert ow.get('accumulative_counts', 1) == 1
    steps_per_epoch = ADE20K_TRAIN_IMAGES // TOTAL_BATCH if DROP_LAST else -(-ADE20K_TRAIN_IMAGES // TOTAL_BATCH)
    max_iters = MAX_EPOCHS * steps_per_epoch
    assert cfg.train_cfg.type == 'IterBasedTrainLoop' and cfg.train_cfg.max_iters == max_iters
    assert cfg.train_cfg.val_interval == steps_per_epoch  # Lightning validates after every epoch by default
    assert cfg.param_scheduler == [dict(type='beit_mm.TwoStageWarmupPolyLR', warmup_steps=WARMUP_STEPS,
                                        poly_power=POLY_POWER, by_epoch=False, begin=0, end=max_iters)]
    assert cfg.train_dataloader.batch_size * GPUS == TOTAL_BATCH == cfg.auto_scale_lr.base_batch_size
    assert 'beit_mm.BatchSizeCheckHook' in [h['type'] for h in cfg.custom_hooks]
    assert cfg.randomness.seed == SEED


@pytest.mark.parametrize('name', [BASE, V2, LARGE, DINO])
def test_precision_and_cudnn_are_the_official(name):
    """Mixed precision and cuDNN flags as the official run (main.py:168-178), read through
    tests/configs/test_recipes.py's readers."""
    from .test_recipes import READERS
    cfg = load(name)
    got = {key: READERS[f'precision.{key}'](cfg) for key in PRECISION}
    assert got == PRECISION, f'{name}: precision {got}, official "16-mixed" (main.py:169): {PRECISION}'
    assert (READERS['cudnn.benchmark'](cfg), READERS['cudnn.deterministic'](cfg)) == (CUDNN_BENCHMARK,
                                                                                      CUDNN_DETERMINISTIC)


@pytest.mark.parametrize('name', [BASE, V2, LARGE, DINO])
def test_model_and_loss_are_the_official(name):
    cfg = load(name)
    m = cfg.model
    assert m.type == 'beit_mm.EoMT' and m.num_classes == NUM_CLASSES and m.num_queries == NUM_QUERIES
    assert m.masked_attn is True and m.ignore_index == 255
    assert m.num_blocks == (VIT_L_NUM_BLOCKS if 'large' in name else VIT_B_NUM_BLOCKS)
    assert m.backbone.arch == ('large' if 'large' in name else 'base')
    assert m.backbone.drop_path_rate == 0.0 and m.backbone.final_norm is True
    assert m.loss == dict(type='beit_mm.MaskClassificationLoss', class_weight=CLASS, mask_weight=MASK,
                          dice_weight=DICE, no_object_weight=NO_OBJECT, num_points=NUM_POINTS,
                          oversample_ratio=OVERSAMPLE_RATIO, importance_sample_ratio=IMPORTANCE_SAMPLE_RATIO)
    assert m.data_preprocessor.mean == pytest.approx(IMAGENET_MEAN) and m.data_preprocessor.std == pytest.approx(
        IMAGENET_STD)
    assert 'beit_mm.EoMTMaskAnnealingHook' in [h['type'] for h in cfg.custom_hooks]


@pytest.mark.parametrize('name', [BASE, V2, LARGE, DINO])
def test_mask_annealing_is_the_official_for_its_number_of_blocks(name):
    """4 blocks: the ADE20K semantic config's steps; 3 blocks: the official 3-block layout (ViT-B COCO) with
    ADE20K's U (the 4-block config's first start)."""
    anneal = load(name).model.mask_annealing
    assert anneal.poly_power == POLY_POWER
    if 'large' in name:
        assert (anneal.start_steps, anneal.end_steps) == (ADE_ANNEAL_START, ADE_ANNEAL_END)
        return
    coco_unit, ade_unit = COCO_L_ANNEAL_START[0], ADE_ANNEAL_START[0]
    assert COCO_B_ANNEAL_START[0] == coco_unit
    assert anneal.start_steps == [s * ade_unit / coco_unit for s in COCO_B_ANNEAL_START]
    assert anneal.end_steps == [e * ade_unit / coco_unit for e in COCO_B_ANNEAL_END]
    assert anneal.end_steps[-1] == ADE_ANNEAL_END[-1]  # both layouts end at 5 U


@pytest.mark.parametrize('name', [BASE, V2, LARGE, DINO])
def test_data_and_test_mode_are_the_official(name):
    """Crop, scale jitter, flip and colour-jitter ranges (hue 18/360 turns = 9 OpenCV units of 2 degrees); test: the
    shorter side resized to the crop, windows of the crop's size whose starts equal the official ones for every image
    up to 2:1."""
    cfg = load(name)
    size = 640 if name == LARGE else IMG_SIZE  # BEiT-L: the UPerNet BEiT-L recipe's crop
    train = {t['type']: t for t in cfg.train_dataloader.dataset.pipeline}
    assert train['LoadAnnotations'].reduce_zero_label is True
    assert train['RandomResize'].scale == (size, size) and train['RandomResize'].ratio_range == SCALE_RANGE
    assert train['RandomResize'].keep_ratio is True
    assert train['RandomCrop'].crop_size == (size, size) and train['RandomCrop'].cat_max_ratio == 1.0
    assert train['RandomFlip'].prob == 0.5
    pmd = train['PhotoMetricDistortion']
    assert pmd.brightness_delta == BRIGHTNESS
    assert pmd.contrast_range == (1 - CONTRAST, 1 + CONTRAST) and pmd.saturation_range == (1 - SATURATION,
                                                                                         1 + SATURATION)
    assert pmd.hue_delta * 2 == HUE  # OpenCV's uint8 hue has 180 units for 360 degrees
    assert cfg.model.data_preprocessor.size == (size, size)
    assert cfg.model.backbone.img_size == size
    test = {t['type']: t for t in cfg.test_dataloader.dataset.pipeline}
    assert min(test['Resize'].scale) == size and test['Resize'].keep_ratio is True
    assert test['LoadAnnotations'].reduce_zero_label is True
    assert cfg.model.data_preprocessor.test_cfg is None  # no padding: every window is a full crop
    tc = cfg.model.test_cfg
    assert tc.mode == 'slide' and tc.crop_size == (size, size)
    assert mmseg_windows(size, size, tc.stride[0]) == [0]
    for long_side in range(size, 2 * size + 1):
        assert mmseg_windows(long_side, size, tc.stride[1]) == official_windows(long_side, size), long_side
    assert cfg.val_evaluator.type == 'IoUMetric' and cfg.val_evaluator.iou_metrics == ['mIoU']


def test_dinov2_backbone_is_the_official_vit_large_with_registers():
    """The DINOv2-style config's ViT is the official ViT-L/16 with 4 registers and patch-only position embeddings,
    and it is what HF's EoMT holds (tests/models/test_eomt_hf.py compares the logits)."""
    b = load(DINO).model.backbone
    from beit_mm.models.backbones.beit import ARCHS
    arch = ARCHS[b.arch]
    assert (arch['embed_dims'], arch['num_layers'], arch['num_heads']) == (
        DINO_L['embed_dims'], DINO_L['num_layers'], DINO_L['num_heads'])
    assert b.patch_size == DINO_L['patch_size'] and b.num_register_tokens == DINO_L['num_register_tokens']
    assert b.use_abs_pos_emb and b.no_embed_class and not b.use_rel_pos_bias and not b.use_shared_rel_pos_bias
    assert b.layer_scale_init_value > 0 and b.img_size == IMG_SIZE


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
    """``arch -> path``: a random BEiT of that (narrowed) arch in unilm's pretrained-only layout (shared table, mask
    token, final norm), converted by beit_mm.apis.convert (tools/convert_checkpoint.py's call), once per depth."""
    folder, paths = tmp_path_factory.mktemp('ckpt'), {}

    def get(arch: dict) -> str:
        key = tuple(sorted(arch.items()))
        if key not in paths:
            src, dst = folder / f'official_{len(paths)}.pth', folder / f'converted_{len(paths)}.pth'
            torch.save({'model': BEiT(arch=arch, img_size=224, use_rel_pos_bias=False, use_shared_rel_pos_bias=True,
                                      with_mask_token=True, final_norm=True).state_dict()}, src)
            convert_checkpoint(str(src), str(dst), model='beit', source='unilm')
            paths[key] = str(dst)
        return paths[key]

    return get


@pytest.mark.parametrize('name', [BASE, V2, LARGE])
def test_full_size_config_trains(name, ade_demo_root, converted, tmp_path):
    """2 iterations and a validation through tools/train.py, the narrowed BEiT loaded from a converted checkpoint,
    its param groups from the EoMT constructor and the lr from the two-stage schedule."""
    cfg = load(name)
    narrow_beit(cfg)
    cfg = shrink_seg_config(cfg, ade_demo_root, converted(cfg.model.backbone.arch), str(tmp_path / 'work'), crop=64)
    cfg.param_scheduler[0].update(warmup_steps=(1, 0), end=2)  # the schedule's length
    cfg.model.loss.num_points = 256  # the 16x16 mask logits of a 64 px crop (12544 points: seconds per step on CPU)
    cfg_path = tmp_path / name
    log = run_train(cfg, cfg_path)
    assert re.search(r'loaded \d+ backbone weights .* \(0 missing, 0 unexpected\)', log), log[-3000:]
    assert 'EoMTLayerDecayOptimWrapperConstructor: llrd=0.8' in log, log[-3000:]
    # the two-stage schedule: heads at 0 then the full lr (warmup 1), backbone held at 0 for 1 step
    assert re.search(r'Iter\(train\) \[1/2\]  base_lr: 0\.0000e\+00', log), log[-2000:]
    assert re.search(r'Iter\(train\) \[2/2\]  base_lr: 1\.0000e-04', log), log[-2000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
    assert os.path.exists(tmp_path / 'work' / 'iter_2.pth')


def test_dinov2_config_trains_from_a_converted_timm_dinov2(ade_demo_root, tmp_path):
    """The DINOv2-style config (narrowed) through tools/train.py for 2 iterations and a validation, its backbone from a
    random timm DINOv2-reg4 file (patch 14) converted to patch 16, as the official run starts."""
    from timm.models.vision_transformer import VisionTransformer
    cfg = load(DINO)
    narrow_beit(cfg)
    arch = cfg.model.backbone.arch
    src, dst = tmp_path / 'timm_dinov2.pth', tmp_path / 'dinov2_p16.pth'
    torch.save(VisionTransformer(img_size=70, patch_size=14, embed_dim=arch['embed_dims'], depth=arch['num_layers'],
                                 num_heads=arch['num_heads'], init_values=1e-5, reg_tokens=4, no_embed_class=True,
                                 num_classes=0).state_dict(), src)
    convert_checkpoint(str(src), str(dst), model='dinov2', source='timm', img_size=64, patch_size=16)
    cfg = shrink_seg_config(cfg, ade_demo_root, str(dst), str(tmp_path / 'work'), crop=64)
    cfg.param_scheduler[0].update(warmup_steps=(1, 0), end=2)
    cfg.model.loss.num_points = 256
    cfg_path = tmp_path / DINO
    log = run_train(cfg, cfg_path)
    assert re.search(r'loaded \d+ backbone weights .* \(0 missing, 0 unexpected\)', log), log[-3000:]
    assert re.search(r'mIoU: \d', log), log[-2000:]
