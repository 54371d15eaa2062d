"""The datasets ViT-Adapter reports besides ADE20K: COCO-Stuff-164k, COCO-Stuff-10k, Pascal Context 59 and Cityscapes.
Each base config reads its demo data, passes the start checks, names a bad label map and trains a tiny model; the
full-size ViT-Adapter configs match every pinned recipe value and take one narrowed training step."""
import copy
import functools
import os
import os.path as osp
import shutil
import sys

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmengine.structures import PixelData
from PIL import Image

from beit_mm.data.checks import DatasetCheckError, check_seg_dataset
from beit_mm.data.demo.cityscapes import CITYSCAPES_NAMES, CITYSCAPES_TRAIN_ID, make_demo_cityscapes
from beit_mm.data.demo.coco_stuff import (COCO_STUFF_INDEX, COCO_STUFF_NAMES, make_demo_coco_stuff10k,
                                          make_demo_coco_stuff164k)
from beit_mm.data.demo.pascal_context import PASCAL_CONTEXT_59_INDEX, make_demo_pascal_context
from beit_mm.data.demo.root import NotADemoRootError

from ..conftest import ROOT, load_tool, narrow_beit
from .test_vit_adapter_configs import PRECISION, read

BASES = osp.join(ROOT, 'configs', '_base_', 'datasets')
TINY = osp.join(ROOT, 'configs', 'demo', 'beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py')
NUM_TRAIN, NUM_VAL, SIZE = 4, 2, 64
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')

# layout -> (generator, base config, mmseg dataset class, classes, image and label-map path of the first training
# pair, the train split's path in the real set (relative to data_root), reduce_zero_label)
LAYOUTS = {
    'coco-stuff164k': (make_demo_coco_stuff164k, 'coco-stuff164k.py', 'COCOStuffDataset', 171,
                       'images/train2017/', 'annotations/train2017/', '_labelTrainIds.png', False),
    'coco-stuff10k': (make_demo_coco_stuff10k, 'coco-stuff10k.py', 'COCOStuffDataset', 171,
                      'images/train2014/COCO_train2014_', 'annotations/train2014/COCO_train2014_',
                      '_labelTrainIds.png', True),
    'pascal-context': (make_demo_pascal_context, 'pascal_context_59.py', 'PascalContextDataset59', 59,
                       'JPEGImages/', 'SegmentationClassContext/', '.png', True),
    'cityscapes': (make_demo_cityscapes, 'cityscapes.py', 'CityscapesDataset', 19,
                   'leftImg8bit/train/', 'gtFine/train/', '_gtFine_labelTrainIds.png', False),
}


@pytest.fixture(scope='module')
def demo_roots(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp('layouts')
    return {name: spec[0](str(base / name), NUM_TRAIN, NUM_VAL, SIZE, seed=0) for name, spec in LAYOUTS.items()}


@functools.lru_cache(maxsize=None)
def _fromfile(path: str) -> Config:
    """A config parsed once per session: callers read it, or change a ``copy.deepcopy`` of it."""
    return Config.fromfile(path)


def _base(layout: str) -> Config:
    return copy.deepcopy(_fromfile(osp.join(BASES, LAYOUTS[layout][1])))


def _dataset(layout: str, root: str, loader: str = 'train_dataloader'):
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    return DATASETS.build({**_base(layout)[loader].dataset, 'data_root': root})


def test_demo_classes_are_the_dataset_classes_of_those_names():
    """The mask value each demo stores for its drawn classes names the same thing in mmseg's class list."""
    from mmseg.datasets import CityscapesDataset, COCOStuffDataset, PascalContextDataset59
    coco = COCOStuffDataset.METAINFO['classes']
    assert {name: coco[i] for name, i in COCO_STUFF_INDEX.items()} == {n: COCO_STUFF_NAMES.get(n, n)
                                                                       for n in COCO_STUFF_INDEX}
    pascal = PascalContextDataset59.METAINFO['classes']
    assert {name: pascal[i] for name, i in PASCAL_CONTEXT_59_INDEX.items()} == {n: n for n in PASCAL_CONTEXT_59_INDEX}
    city = CityscapesDataset.METAINFO['classes']
    assert {name: city[i] for name, i in CITYSCAPES_TRAIN_ID.items()} == {n: CITYSCAPES_NAMES.get(n, n)
                                                                         for n in CITYSCAPES_TRAIN_ID}


@pytest.mark.parametrize('layout', sorted(LAYOUTS))
def test_base_config_reads_the_demo_layout_and_its_checks_pass(layout, demo_roots):
    _, _, dataset_type, num_classes, img_prefix, seg_prefix, seg_suffix, reduce = LAYOUTS[layout]
    root = demo_roots[layout]
    for loader, count in (('train_dataloader', NUM_TRAIN), ('val_dataloader', NUM_VAL)):
        dataset = _dataset(layout, root, loader)
        assert type(dataset).__name__ == dataset_type and len(dataset) == count
        assert len(dataset.metainfo['classes']) == num_classes
        check_seg_dataset(dataset, loader, num_samples=None)  # raises on any problem
    train = _dataset(layout, root)
    first = train.get_data_info(0)
    img, seg = osp.relpath(first['img_path'], root), osp.relpath(first['seg_map_path'], root)
    assert img.startswith(img_prefix) and seg.startswith(seg_prefix) and seg.endswith(seg_suffix), (img, seg)
    values = set()
    for i in range(NUM_TRAIN):
        values |= set(np.unique(np.asarray(Image.open(train.get_data_info(i)['seg_map_path']))).tolist())
    # the stored convention: 0 = unlabeled/background below the classes 1..N with reduce_zero_label, else 0..N-1 and
    # 255; every demo stores its void label
    assert (0 in values) if reduce else (255 in values)
    assert max(v for v in values if v != 255) <= (num_classes if reduce else num_classes - 1)
    assert [t.get('reduce_zero_label', False) for t in _base(layout).train_dataloader.dataset.pipeline
            if t.type == 'LoadAnnotations'] == [reduce]


def test_pascal_context_lists_its_splits_and_leaves_unlisted_images_alone(demo_roots):
    root = demo_roots['pascal-context']
    listed = {split: open(osp.join(root, 'ImageSets', 'SegmentationContext', f'{split}.txt')).read().split()
              for split in ('train', 'val')}
    assert [len(listed['train']), len(listed['val'])] == [NUM_TRAIN, NUM_VAL]
    images = {osp.splitext(n)[0] for n in os.listdir(osp.join(root, 'JPEGImages'))}
    assert set(listed['train'] + listed['val']) < images  # VOC2010 holds more images than the context splits list
    assert {osp.splitext(n)[0] for n in os.listdir(osp.join(root, 'SegmentationClassContext'))} == set(
        listed['train'] + listed['val'])


def test_cityscapes_cities_and_frames(demo_roots):
    root = demo_roots['cityscapes']
    assert sorted(os.listdir(osp.join(root, 'leftImg8bit', 'val'))) == ['frankfurt', 'lindau']
    image = Image.open(_dataset('cityscapes', root).get_data_info(0)['img_path'])
    assert image.size == (2 * SIZE, SIZE) and image.format == 'PNG'


@pytest.mark.parametrize('layout', sorted(LAYOUTS))
def test_start_of_training_check_names_a_label_map_out_of_range(layout, demo_roots, tmp_path):
    root = str(tmp_path / layout)
    shutil.copytree(demo_roots[layout], root)
    seg_path = _dataset(layout, root).get_data_info(1)['seg_map_path']
    mask = np.asarray(Image.open(seg_path)).copy()
    mask[:4, :4] = 200  # neither a class (171, 59, 19; 172/60 raw with reduce_zero_label) nor 255
    Image.fromarray(mask).save(seg_path)
    with pytest.raises(DatasetCheckError, match='200') as info:
        check_seg_dataset(_dataset(layout, root), 'train', num_samples=None)
    assert seg_path in str(info.value)


def test_generators_own_their_roots(demo_roots, tmp_path):
    """Same arguments: nothing rewritten; another generator's root or a foreign folder: refused."""
    root = demo_roots['cityscapes']
    seg = _dataset('cityscapes', root).get_data_info(0)['seg_map_path']
    before = os.stat(seg).st_mtime_ns
    make_demo_cityscapes(root, NUM_TRAIN, NUM_VAL, SIZE, seed=0)
    assert os.stat(seg).st_mtime_ns == before
    with pytest.raises(NotADemoRootError, match='is a demo root of'):
        make_demo_pascal_context(root, NUM_TRAIN, NUM_VAL, SIZE)
    foreign = tmp_path / 'mine'
    foreign.mkdir()
    (foreign / 'notes.txt').write_text('keep me')
    with pytest.raises(NotADemoRootError, match='is not a demo root'):
        make_demo_coco_stuff164k(str(foreign), NUM_TRAIN, NUM_VAL, SIZE)
    assert os.listdir(foreign) == ['notes.txt']


def test_a_generator_root_is_regenerated_for_other_arguments(tmp_path):
    """Fewer images: the files of the old arguments go, the dataset lists only the new ones."""
    root = make_demo_pascal_context(str(tmp_path / 'voc'), 4, 2, 32, seed=0)
    make_demo_pascal_context(root, 2, 1, 32, seed=1)
    counts = [len(_dataset('pascal-context', root, loader)) for loader in ('train_dataloader', 'val_dataloader')]
    assert counts == [2, 1]
    assert len(os.listdir(osp.join(root, 'JPEGImages'))) == 2 + 1 + 1  # and one unlisted image
    assert len(os.listdir(osp.join(root, 'SegmentationClassContext'))) == 3


def test_make_demo_data_layouts(tmp_path, monkeypatch, capsys):
    tool = load_tool('tools/make_demo_data.py')
    assert set(LAYOUTS) <= set(tool.LAYOUTS)
    root = str(tmp_path / 'voc2010')
    monkeypatch.setattr(sys, 'argv', ['make_demo_data.py', '--layout', 'pascal-context', '--root', root,
                                      '--num-train', '2', '--num-val', '1', '--size', '32'])
    tool.main()
    assert capsys.readouterr().out.strip() == f'{root}: pascal-context layout, 2 train + 1 val images'
    assert len(_dataset('pascal-context', root)) == 2


@pytest.mark.parametrize('layout', sorted(LAYOUTS))
def test_tiny_model_trains_and_evaluates_on_each_dataset_config(layout, demo_roots, tmp_path):
    """The tiny demo model with the dataset config's loaders, dataset, pipelines and evaluator (sizes, workers and root
    changed): the start checks pass, 2 iterations, then mIoU over the validation split."""
    cfg = Config.fromfile(TINY)
    base = _base(layout)
    num_classes = LAYOUTS[layout][3]
    for loader in LOADERS:
        cfg[loader] = base[loader]
        cfg[loader].num_workers, cfg[loader].persistent_workers = 0, False
        cfg[loader].dataset.data_root = demo_roots[layout]
        for t in cfg[loader].dataset.pipeline:
            if t.type in ('RandomResize', 'Resize'):
                t.scale = (4 * SIZE, SIZE)
            if t.type.split('.')[-1] in ('RandomCrop', 'HistogramRandomCrop'):
                t.crop_size = (SIZE, SIZE)
    cfg.train_dataloader.batch_size = 2
    cfg.val_evaluator = cfg.test_evaluator = base.val_evaluator
    cfg.model.decode_head.num_classes = cfg.model.auxiliary_head.num_classes = num_classes
    cfg.work_dir = str(tmp_path / 'work')
    cfg.train_cfg.max_iters, cfg.train_cfg.val_interval = 2, 100
    cfg.default_hooks.checkpoint.interval = 100
    cfg.visualizer.pop('name')
    runner = Runner.from_cfg(cfg)
    assert any(type(h).__name__ == 'SegDatasetCheckHook' for h in runner.hooks)
    runner.train()
    assert runner.iter == 2
    metrics = runner.val_loop.run()
    assert 0.0 <= metrics['mIoU'] <= 100.0 and runner.val_loop.dataloader.dataset.metainfo['classes'] == type(
        runner.val_loop.dataloader.dataset).METAINFO['classes']


# ------------------------------------------------------------------------------------------ full-size configs
# czczup/ViT-Adapter@fd64a51 segmentation/configs/ (path:line):
# S164 = coco_stuff164k/upernet_beit_adapter_large_640_80k_cocostuff164k_ss.py,
# S10 = coco_stuff10k/upernet_beit_adapter_large_512_80k_cocostuff10k_ss.py,
# SP = pascal_context/upernet_beit_adapter_large_480_80k_pascal_context_59_ss.py,
# C10 = coco_stuff10k/mask2former_beit_adapter_base_512_40k_cocostuff10k_ss.py,
# CP = pascal_context/mask2former_beit_adapter_base_480_40k_pascal_context_59_ss.py,
# L10 = coco_stuff10k/mask2former_beit_adapter_large_512_40k_cocostuff10k_ss.py,
# LP = pascal_context/mask2former_beit_adapter_large_480_40k_pascal_context_59_ss.py;
# M164 = coco_stuff164k/mask2former_beit_adapter_large_896_80k_cocostuff164k_ss.py,
# V164 = coco_stuff164k/mask2former_beitv2_adapter_large_896_80k_cocostuff164k_ss.py (M164 but the checkpoint, V164:10),
# CS = cityscapes/mask2former_beit_adapter_large_896_80k_cityscapes_ss.py, CD = _base_/datasets/cityscapes_896x896.py;
# the schedules _base_/schedules/schedule_{40k,80k}.py:7; the class counts of the Mask2Former models
# _base_/models/mask2former_beit_{cocostuff,pascal,cityscapes}.py:2-4 (80 + 91, 29 + 30, 8 + 11).
CFG = osp.join(ROOT, 'configs', 'vit_adapter')
U164 = 'beit-adapter-large_upernet_8xb2-80k_coco-stuff164k-640x640.py'
U10 = 'beit-adapter-large_upernet_8xb2-80k_coco-stuff10k-512x512.py'
UP = 'beit-adapter-large_upernet_8xb2-80k_pascal-context-59-480x480.py'
M10 = 'mask2former_beit-adapter-base_8xb2-40k_coco-stuff10k-512x512.py'
MP = 'mask2former_beit-adapter-base_8xb2-40k_pascal-context-59-480x480.py'
ML10 = 'mask2former_beit-adapter-large_8xb2-40k_coco-stuff10k-512x512.py'
MLP = 'mask2former_beit-adapter-large_8xb2-40k_pascal-context-59-480x480.py'
ML164 = 'mask2former_beit-adapter-large_8xb2-80k_coco-stuff164k-896x896.py'
MV164 = 'mask2former_beitv2-adapter-large_8xb2-80k_coco-stuff164k-896x896.py'
MC = 'mask2former_beit-adapter-large_8xb2-80k_cityscapes-896x896.py'


def _large_adapter(f: str, o: int = 0) -> dict:
    """The BEiT-L adapter of ViT-Adapter's BEiT-L files (``f`` their tag, ``o`` their line offset: the Pascal Context
    files have one more line, img_scale at :9), UPerNet and Mask2Former alike (lines 16-32)."""
    return {
        'backbone.patch_size': (16, f'{f}:{16 + o}'),
        'backbone.arch': ('large', f'{f}:{17 + o}-{20 + o} (1024 wide, 24 blocks, 16 heads, mlp 4)'),
        'backbone.use_abs_pos_emb': (False, f'{f}:{22 + o}'),
        'backbone.use_rel_pos_bias': (True, f'{f}:{23 + o}'),
        'backbone.layer_scale_init_value': (1e-6, f'{f}:{24 + o}'),
        'backbone.drop_path_rate': (0.3, f'{f}:{25 + o}'),
        'backbone.conv_inplane': (64, f'{f}:{26 + o}'),
        'backbone.n_points': (4, f'{f}:{27 + o}'),
        'backbone.deform_num_heads': (16, f'{f}:{28 + o}'),
        'backbone.cffn_ratio': (0.25, f'{f}:{29 + o}'),
        'backbone.deform_ratio': (0.5, f'{f}:{30 + o}'),
        'backbone.with_cp': (True, f'{f}:{31 + o}'),
        'backbone.interaction_indexes': ([[0, 5], [6, 11], [12, 17], [18, 23]], f'{f}:{32 + o}'),
    }


def _large(f: str, o: int = 0) -> dict:
    """ViT-Adapter's UPerNet BEiT-L files: the adapter, UPerHead at 1024, data, optimizer and schedule."""
    return {
        **_large_adapter(f, o),
        'head.in_channels': ([1024] * 4, f'{f}:{35 + o}'),
        'head.channels': (1024, f'{f}:{37 + o}'),
        'aux.in_channels': (1024, f'{f}:{40 + o}'),
        'data.mean': ([123.675, 116.28, 103.53], f'{f}:{46 + o}'),
        'data.std': ([58.395, 57.12, 57.375], f'{f}:{46 + o}'),
        'data.ratio_range': ((0.5, 2.0), f'{f}:{50 + o}'),
        'data.cat_max_ratio': (0.75, f'{f}:{51 + o}'),
        'data.flip': (0.5, f'{f}:{52 + o}'),
        'eval.size_divisor': (32, f'{f}:{68 + o}'),
        'eval.mode': ('slide', f'{f}:{43 + o}'),
        'optimizer.lr': (2e-5, f'{f}:{75 + o}'),
        'optimizer.betas': ((0.9, 0.999), f'{f}:{75 + o}'),
        'optimizer.weight_decay': (0.05, f'{f}:{75 + o}'),
        'layer_decay': (0.90, f'{f}:{77 + o}'),
        'schedule.warmup': (1500, f'{f}:{80 + o}'),
        'schedule.warmup_start': (1e-6, f'{f}:{81 + o}'),
        'schedule.poly_power': (1.0, f'{f}:{82 + o}'),
        'schedule.min_lr': (0.0, f'{f}:{82 + o}'),
        'schedule.max_iters': (80000, 'schedule_80k.py:7'),
        'eval.interval': (8000, f'{f}:89' if f == 'S164' else f'{f}:90'),
    }


def _large_m2f(f: str, o: int = 0) -> dict:
    """ViT-Adapter's Mask2Former BEiT-L files of COCO-Stuff-10k / Pascal Context: the adapter, the 1024-wide head
    (32 attention heads, 4096-wide FFNs), data, optimizer and schedule."""
    return {
        **_large_adapter(f, o),
        'head.in_channels': ([1024] * 4, f'{f}:{35 + o}'),
        'head.feat_channels': (1024, f'{f}:{36 + o}'),
        'head.out_channels': (1024, f'{f}:{37 + o}'),
        'head.num_queries': (100, f'{f}:{38 + o}'),
        'head.enc_heads': (32, f'{f}:{52 + o}'),
        'head.enc_ffn': (4096, f'{f}:{63 + o}'),
        'head.pos_feats': (512, f'{f}:{71 + o}, {74 + o}'),
        'head.dec_heads': (32, f'{f}:{84 + o}'),
        'head.dec_ffn': (4096, f'{f}:{91 + o}'),
        'data.mean': ([123.675, 116.28, 103.53], f'{f}:{107 + o}'),
        'data.std': ([58.395, 57.12, 57.375], f'{f}:{107 + o}'),
        'data.ratio_range': ((0.5, 2.0), f'{f}:{111 + o}'),
        'data.cat_max_ratio': (0.75, f'{f}:{112 + o}'),
        'data.flip': (0.5, f'{f}:{113 + o}'),
        'eval.size_divisor': (32, f'{f}:{130 + o}'),
        'eval.mode': ('slide', f'{f}:{103 + o}'),
        'optimizer.lr': (2e-5, f'{f}:{137 + o}'),
        'optimizer.betas': ((0.9, 0.999), f'{f}:{137 + o}'),
        'optimizer.weight_decay': (0.05, f'{f}:{137 + o}'),
        'layer_decay': (0.90, f'{f}:{139 + o}'),
        'schedule.warmup': (1500, f'{f}:{143 + o}'),
        'schedule.warmup_start': (1e-6, f'{f}:{144 + o}'),
        'schedule.poly_power': (1.0, f'{f}:{145 + o}'),
        'schedule.min_lr': (0.0, f'{f}:{145 + o}'),
        'schedule.max_iters': (40000, 'schedule_40k.py:7'),
        'eval.interval': (4000, f'{f}:{152 + o}'),
        'total_batch': (16, f'{f}:{146 + o} (2 per GPU) x 8 GPUs (README.md:15 "8x2")'),
    }


def _base_b(f: str, o: int = 0) -> dict:
    """The BEiT-B adapter and Mask2Former head of ViT-Adapter's C10 / CP (``o``: CP's img_scale line, CP:9)."""
    return {
        'backbone.patch_size': (16, f'{f}:{16 + o}'),
        'backbone.arch': ('base', f'{f}:{17 + o}-{20 + o} (768 wide, 12 blocks, 12 heads, mlp 4)'),
        'backbone.use_abs_pos_emb': (False, f'{f}:{22 + o}'),
        'backbone.use_rel_pos_bias': (True, f'{f}:{23 + o}'),
        'backbone.layer_scale_init_value': (1e-6, f'{f}:{24 + o}'),
        'backbone.drop_path_rate': (0.2, f'{f}:{25 + o}'),
        'backbone.conv_inplane': (64, f'{f}:{26 + o}'),
        'backbone.n_points': (4, f'{f}:{27 + o}'),
        'backbone.deform_num_heads': (12, f'{f}:{28 + o}'),
        'backbone.cffn_ratio': (0.25, f'{f}:{29 + o}'),
        'backbone.deform_ratio': (0.5, f'{f}:{30 + o}'),
        'backbone.with_cp': (False, f'none in {f}: mmseg_custom/models/backbones/beit_adapter.py:25 default'),
        'backbone.interaction_indexes': ([[0, 2], [3, 5], [6, 8], [9, 11]], f'{f}:{31 + o}'),
        'head.in_channels': ([768] * 4, f'{f}:{34 + o}'),
        'head.feat_channels': (256, f'{f}:{35 + o}'),
        'head.out_channels': (256, f'{f}:{36 + o}'),
        'head.num_queries': (100, f'{f}:{37 + o}'),
        'head.enc_heads': (8, f'{f}:{51 + o}'),
        'head.enc_ffn': (1024, f'{f}:{62 + o}'),
        'head.pos_feats': (128, f'{f}:{69 + o}, {72 + o}'),
        'head.dec_heads': (8, f'{f}:{82 + o}'),
        'head.dec_ffn': (2048, f'{f}:{89 + o}'),
        'data.mean': ([123.675, 116.28, 103.53], f'{f}:{104 + o}'),
        'data.std': ([58.395, 57.12, 57.375], f'{f}:{104 + o}'),
        'data.ratio_range': ((0.5, 2.0), f'{f}:{108 + o}'),
        'data.cat_max_ratio': (0.75, f'{f}:{109 + o}'),
        'data.flip': (0.5, f'{f}:{110 + o}'),
        'eval.size_divisor': (32, f'{f}:{127 + o}'),
        'eval.mode': ('slide', f'{f}:{100 + o}'),
        'optimizer.lr': (3e-5, f'{f}:{134 + o}'),
        'optimizer.betas': ((0.9, 0.999), f'{f}:{134 + o}'),
        'optimizer.weight_decay': (0.05, f'{f}:{134 + o}'),
        'layer_decay': (0.95, f'{f}:{136 + o}'),
        'schedule.warmup': (1500, f'{f}:{140 + o}'),
        'schedule.warmup_start': (1e-6, f'{f}:{141 + o}'),
        'schedule.poly_power': (1.0, f'{f}:{142 + o}'),
        'schedule.min_lr': (0.0, f'{f}:{142 + o}'),
        'schedule.max_iters': (40000, 'schedule_40k.py:7'),
        'eval.interval': (4000, f'{f}:{149 + o}'),
        'total_batch': (16, f'{f}:{143 + o} (2 per GPU) x 8 GPUs (README.md:13 "8x2")'),
    }


RECIPES = {
    U164: {**PRECISION, **_large('S164'),
           'backbone.img_size': (640, 'S164:15'),
           'crop': ((640, 640), 'S164:8'),
           'classes': (171, 'S164:36, 41'),
           'data.reduce_zero_label': (False, 'S164:49'),
           'data.train_scale': ((2560, 640), 'S164:50'),
           'eval.test_scale': ((2560, 640), 'S164:63'),
           'eval.stride': ((426, 426), 'S164:43'),
           'total_batch': (16, 'S164:83 (2 per GPU) x 8 GPUs (README.md:13 "8x2")')},
    U10: {**PRECISION, **_large('S10'),
          'backbone.img_size': (512, 'S10:15'),
          'crop': ((512, 512), 'S10:8'),
          'classes': (171, 'S10:36, 41'),
          'data.reduce_zero_label': (True, 'S10:49'),
          'data.train_scale': ((2048, 512), 'S10:50'),
          'eval.test_scale': ((2048, 512), 'S10:63'),
          'eval.stride': ((341, 341), 'S10:43'),
          'total_batch': (16, 'S10:84 (2 per GPU) x 8 GPUs (README.md:14 "8x2")')},
    UP: {**PRECISION, **_large('SP', 1),
         'backbone.img_size': (480, 'SP:16'),
         'crop': ((480, 480), 'SP:8'),
         'classes': (59, 'SP:37, 42'),
         'data.reduce_zero_label': (True, 'SP:50'),
         'data.train_scale': ((520, 520), 'SP:9, 51'),
         'eval.test_scale': ((4096, 520), 'SP:64'),
         'eval.stride': ((320, 320), 'SP:44'),
         'total_batch': (16, 'SP:84 (2 per GPU) x 8 GPUs (README.md:14 "8x2")')},
    M10: {**PRECISION, **_base_b('C10'),
          'backbone.img_size': (512, 'C10:15'),
          'crop': ((512, 512), 'C10:8'),
          'classes': (171, 'mask2former_beit_cocostuff.py:2-4'),
          'data.reduce_zero_label': (True, 'C10:107'),
          'data.train_scale': ((2048, 512), 'C10:108'),
          'eval.test_scale': ((2048, 512), 'C10:122'),
          'eval.stride': ((341, 341), 'C10:100')},
    MP: {**PRECISION, **_base_b('CP', 1),
         'backbone.img_size': (480, 'CP:16'),
         'crop': ((480, 480), 'CP:8'),
         'classes': (59, 'mask2former_beit_pascal.py:2-4'),
         'data.reduce_zero_label': (True, 'CP:108'),
         'data.train_scale': ((520, 520), 'CP:9, 109'),
         'eval.test_scale': ((4096, 520), 'CP:123'),
         'eval.stride': ((320, 320), 'CP:101')},
    ML10: {**PRECISION, **_large_m2f('L10'),
           'backbone.img_size': (512, 'L10:15'),
           'crop': ((512, 512), 'L10:8'),
           'classes': (171, 'mask2former_beit_cocostuff.py:2-4'),
           'data.reduce_zero_label': (True, 'L10:110'),
           'data.train_scale': ((2048, 512), 'L10:111'),
           'eval.test_scale': ((2048, 512), 'L10:125'),
           'eval.stride': ((341, 341), 'L10:103')},
    MLP: {**PRECISION, **_large_m2f('LP', 1),
          'backbone.img_size': (480, 'LP:16'),
          'crop': ((480, 480), 'LP:8'),
          'classes': (59, 'mask2former_beit_pascal.py:2-4'),
          'data.reduce_zero_label': (True, 'LP:111'),
          'data.train_scale': ((520, 520), 'LP:9, 112'),
          'eval.test_scale': ((4096, 520), 'LP:126'),
          'eval.stride': ((320, 320), 'LP:104')},
}


def _m164(f: str) -> dict:
    """ViT-Adapter's COCO-Stuff-164k Mask2Former BEiT-L / BEiT v2-L files (line for line the same but the checkpoint):
    L10's lines shifted by one after :11 (the model type line), at 896 with 200 queries, 80k iterations."""
    return {**PRECISION, **_large_m2f(f, 1),
            'backbone.img_size': (896, f'{f}:16'),
            'crop': ((896, 896), f'{f}:8'),
            'classes': (171, 'mask2former_beit_cocostuff.py:2-4'),
            'head.num_queries': (200, f'{f}:39'),
            'data.reduce_zero_label': (False, f'{f}:111'),
            'data.train_scale': ((3584, 896), f'{f}:112'),
            'eval.test_scale': ((3584, 896), f'{f}:126'),
            'eval.stride': ((512, 512), f'{f}:104'),
            'schedule.max_iters': (80000, 'schedule_80k.py:7'),
            'eval.interval': (8000, f'{f}:153'),
            'total_batch': (16, f'{f}:147 (1 per GPU) x 16 GPUs (README.md:14-15 "16x1")')}


RECIPES.update({
    ML164: {**_m164('M164'), 'checkpoint': ('beit-large_pt22k-ft22k.pth', 'M164:10 beit_large_patch16_224_pt22k_'
                                            'ft22k, converted --model beit --source unilm')},
    MV164: {**_m164('V164'), 'checkpoint': ('beitv2-large_pt1k-ft21k.pth', 'V164:10 beitv2_large_patch16_224_pt1k_'
                                            'ft21k, converted --model beit --source unilm')},
    # CS's model lines are L10's shifted by two (load_from at :11-12), its optimizer and schedule lines by -14 (no
    # test pipeline of its own: CD's)
    MC: {**PRECISION, **_large_m2f('CS', 2),
         'backbone.img_size': (896, 'CS:17'),
         'crop': ((896, 896), 'CS:8'),
         'classes': (19, 'mask2former_beit_cityscapes.py:2-4'),
         'head.num_queries': (100, 'CS:40'),
         'data.reduce_zero_label': (False, 'CS:112'),
         'data.train_scale': ((2048, 1024), 'CS:113'),
         'eval.test_scale': ((2048, 1024), 'CD:21'),
         'eval.size_divisor': (None, 'CD:24-29: no ResizeToMultiple'),
         'eval.stride': ((512, 512), 'CS:105'),
         'optimizer.lr': (2e-5, 'CS:123'),
         'optimizer.betas': ((0.9, 0.999), 'CS:123'),
         'optimizer.weight_decay': (0.05, 'CS:123'),
         'layer_decay': (0.90, 'CS:125'),
         'schedule.warmup': (1500, 'CS:129'),
         'schedule.warmup_start': (1e-6, 'CS:130'),
         'schedule.poly_power': (1.0, 'CS:131'),
         'schedule.min_lr': (0.0, 'CS:131'),
         'schedule.max_iters': (80000, 'schedule_80k.py:7'),
         'eval.interval': (1000, 'CS:136'),
         'total_batch': (16, 'CS:132 (1 per GPU) x 16 GPUs (cityscapes/README.md:15 "16x1")'),
         # CS:11-12 load_from the Mapillary segmentor: its backbone converted (the head does not convert)
         'checkpoint': ('beit-adapter-large_m2f-mapillary_backbone.pth', 'CS:11-12 mask2former_beit_adapter_large_'
                        '896_80k_mapillary, backbone converted --model vit_adapter --source official'),
         'load_from': (None, 'CS:11-12: the Mapillary head does not convert (docs/checkpoints.md)')},
})
# the dataset each config's published number is on, and the mmseg dataset class that reads it
DATASET_TYPES = {U164: 'COCOStuffDataset', U10: 'COCOStuffDataset', UP: 'PascalContextDataset59',
                 M10: 'COCOStuffDataset', MP: 'PascalContextDataset59', ML10: 'COCOStuffDataset',
                 MLP: 'PascalContextDataset59', ML164: 'COCOStuffDataset', MV164: 'COCOStuffDataset',
                 MC: 'CityscapesDataset'}


def _heads_classes(c) -> int:
    """The one class count of every head (and of Mask2Former's class weights, one per class + no-object)."""
    counts = {c.model.decode_head.num_classes}
    if c.model.get('auxiliary_head'):
        counts.add(c.model.auxiliary_head.num_classes)
    loss_cls = c.model.decode_head.get('loss_cls')
    if loss_cls and loss_cls.get('class_weight'):
        counts.add(len(loss_cls.class_weight) - 1)
    return counts.pop() if len(counts) == 1 else sorted(counts)


def _read(cfg: Config, key: str):
    if key == 'data.reduce_zero_label':
        # every loader's LoadAnnotations, and the dataset's own flag where the config sets it
        values = {bool(t.get('reduce_zero_label', False)) for loader in LOADERS
                  for t in cfg[loader].dataset.pipeline if t.type == 'LoadAnnotations'}
        values |= {bool(cfg[loader].dataset.reduce_zero_label) for loader in LOADERS
                   if 'reduce_zero_label' in cfg[loader].dataset}
        return values.pop() if len(values) == 1 else sorted(values)
    if key == 'classes':
        return _heads_classes(cfg)
    if key == 'eval.size_divisor':
        steps = [t for t in cfg.test_dataloader.dataset.pipeline if t.type == 'ResizeToMultiple']
        return steps[0].size_divisor if steps else None
    if key == 'checkpoint':  # the file the backbone starts from
        return osp.basename(cfg.model.backbone.init_cfg.checkpoint)
    if key == 'load_from':
        return cfg.get('load_from')
    return read(cfg, key)


PINNED = [(name, key) for name in sorted(RECIPES) for key in sorted(RECIPES[name])]


def test_every_non_ade20k_vit_adapter_config_is_pinned():
    """Every semantic-segmentation ViT-Adapter config of another dataset than ADE20K is pinned here (the COCO panoptic
    one, mmdet's Mask2Former, in tests/models/test_panoptic_mask2former.py)."""
    names = sorted(f for f in os.listdir(CFG) if f.endswith('.py') and 'ade20k' not in f and 'coco-panoptic' not in f)
    assert names == sorted(RECIPES)


@pytest.mark.parametrize('name,key', PINNED)
def test_config_has_the_published_value(name, key):
    value, source = RECIPES[name][key]
    got = _read(_fromfile(osp.join(CFG, name)), key)
    assert got == value, f'{name} {key} = {got!r}, ViT-Adapter {source}: {value!r}'


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_config_reads_its_dataset_through_the_base_config(name):
    cfg = _fromfile(osp.join(CFG, name))
    base = _fromfile(osp.join(BASES, {'COCOStuffDataset': 'coco-stuff10k.py' if '10k' in name
                                            else 'coco-stuff164k.py',
                                            'PascalContextDataset59': 'pascal_context_59.py',
                                            'CityscapesDataset': 'cityscapes.py'}[DATASET_TYPES[name]]))
    for loader in LOADERS:
        ds, ref = cfg[loader].dataset, base[loader].dataset
        assert ds.type == DATASET_TYPES[name]
        assert (ds.data_root, dict(ds.data_prefix), ds.get('ann_file'), ds.get('reduce_zero_label')) == (
            ref.data_root, dict(ref.data_prefix), ref.get('ann_file'), ref.get('reduce_zero_label'))


# One config of each model family (U164 and UP build U10's model, MP M10's, ML10 and MLP the ADE20K BEiT-L
# Mask2Former's, at other class counts and sizes pinned above).
STEPPED = (U10, MP)


def _narrowed(name: str):
    """The config's model at 64 channels (its depth, interactions, heads, losses and class count kept), 64 px:
    ``(cfg, model)``."""
    import mmdet.models  # noqa: F401  (the Mask2Former head's parts)
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = copy.deepcopy(_fromfile(osp.join(CFG, name)))
    narrow_beit(cfg)
    head = cfg.model.decode_head
    if 'pixel_decoder' in head:  # BEiT-B's 256-wide head narrowed too (its structure kept; the full width trains in
        head.train_cfg.num_points = 256  # test_vit_adapter_configs.py's ADE20K step): 64 channels, 128-wide FFNs
        head.feat_channels = head.out_channels = 64
        head.positional_encoding.num_feats = head.pixel_decoder.positional_encoding.num_feats = 32
        for layers in (head.pixel_decoder.encoder.layer_cfg, head.transformer_decoder.layer_cfg):
            for attn in ('self_attn_cfg', 'cross_attn_cfg'):
                if attn in layers:
                    layers[attn].embed_dims = 64
            layers.ffn_cfg.embed_dims, layers.ffn_cfg.feedforward_channels = 64, 128
    backbone = cfg.model.backbone
    backbone.img_size, backbone.init_cfg = 64, None
    if 64 % backbone.deform_num_heads:  # BEiT-B's 12 deformable heads do not divide 64 channels
        backbone.deform_num_heads = backbone.arch['num_heads']
    backbone.norm_cfg = dict(type='BN', requires_grad=True)
    cfg.model.data_preprocessor.size = (64, 64)
    for sub in ('decode_head', 'auxiliary_head'):  # one process: BN for SyncBN (as tools/train.py does)
        if cfg.model.get(sub) and 'norm_cfg' in cfg.model[sub]:
            cfg.model[sub].norm_cfg = dict(type='BN', requires_grad=True)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


@pytest.mark.parametrize('name', STEPPED)
def test_narrowed_config_builds_and_takes_a_training_step(name):
    """The config's model at 64 channels (its depth, interactions, heads, losses and class count kept), 64 px, one
    optimizer step through its own optim wrapper constructor."""
    from mmseg.structures import SegDataSample
    cfg, model = _narrowed(name)
    num_classes, _ = RECIPES[name]['classes']
    assert model.decode_head.num_classes == num_classes
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    samples = []
    for _ in range(2):
        s = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, 64, 64)))
        samples.append(s)
    data = dict(inputs=[torch.randint(0, 255, (3, 64, 64), dtype=torch.uint8) for _ in range(2)],
                data_samples=samples)
    before = model.backbone.interactions[0].injector.attn.value_proj.weight.detach().clone()
    losses = model.train_step(data, wrapper)
    assert all(torch.isfinite(v).all() for v in losses.values())
    assert not torch.equal(before, model.backbone.interactions[0].injector.attn.value_proj.weight)


# The 896 configs: a step on their own dataset's demo layout through their own train pipeline.
# MV164 builds ML164's model (only the checkpoint differs, pinned above).
DEMO_STEPPED = ((MC, 'cityscapes'), (ML164, 'coco-stuff164k'))


@pytest.mark.parametrize('name,layout', DEMO_STEPPED)
def test_narrowed_config_takes_a_training_step_on_its_demo_layout(name, layout, demo_roots):
    """The narrowed model on two images of its demo layout through the config's own dataset, train pipeline,
    preprocessor and optim wrapper constructor: finite losses, the adapter's weights move."""
    from mmengine.dataset import pseudo_collate
    from mmseg.registry import DATASETS
    cfg, model = _narrowed(name)
    assert model.decode_head.num_classes == RECIPES[name]['classes'][0] == LAYOUTS[layout][3]
    dataset_cfg = copy.deepcopy(cfg.train_dataloader.dataset)
    dataset_cfg.data_root = demo_roots[layout]
    for t in dataset_cfg.pipeline:
        if t.type == 'RandomResize':
            t.scale = (2 * SIZE, SIZE)
        if t.type.split('.')[-1] in ('RandomCrop', 'HistogramRandomCrop'):
            t.crop_size = (SIZE, SIZE)
    dataset = DATASETS.build(dataset_cfg)
    assert type(dataset).__name__ == DATASET_TYPES[name] and len(dataset) == NUM_TRAIN
    data = pseudo_collate([dataset[0], dataset[1]])
    labels = set(torch.cat([s.gt_sem_seg.data.flatten() for s in data['data_samples']]).tolist()) - {255}
    assert labels and max(labels) < LAYOUTS[layout][3]
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    before = model.backbone.interactions[0].injector.attn.value_proj.weight.detach().clone()
    losses = model.train_step(data, wrapper)
    assert 'decode.loss_cls' in losses and all(torch.isfinite(v).all() for v in losses.values())
    assert not torch.equal(before, model.backbone.interactions[0].injector.attn.value_proj.weight)


def test_full_size_mask2former_has_the_published_parameter_count():
    """M10 at its own widths (BEiT-B adapter, 256-wide Mask2Former head, 171 classes): 120M parameters, the #Param of
    ViT-Adapter's segmentation/configs/coco_stuff10k/README.md:13."""
    import mmdet.models  # noqa: F401  (the Mask2Former head's parts)
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = copy.deepcopy(_fromfile(osp.join(CFG, M10)))
    cfg.model.backbone.init_cfg = None
    torch.manual_seed(0)
    count = sum(p.numel() for p in MODELS.build(cfg.model).parameters())
    assert round(count / 1e6) == 120, f'{M10}: {count / 1e6:.1f}M parameters, ViT-Adapter README.md:13: 120M'


def test_each_layout_is_a_dataset_root_without_the_demo_marker(demo_roots, tmp_path):
    """No output may land in a dataset root: a real COCO-Stuff, Pascal Context or Cityscapes root carries no demo
    marker, so its own folders must make it one."""
    from beit_mm.fileio.dataset_roots import DEMO_MARKER, is_dataset_root
    for layout, root in demo_roots.items():
        real = tmp_path / layout
        for top in os.listdir(root):
            if top != DEMO_MARKER and os.path.isdir(os.path.join(root, top)):
                (real / top).mkdir(parents=True)
        assert is_dataset_root(str(real)), (layout, sorted(os.listdir(real)))
