"""The tools ask the model, not its class name: a subclass registered under another name, a scoped or unscoped registry
name and a class given as the config's type all get what their class declares (EoMT's inference weights, export and
hub model kind, the HF config checks, the data checks' loaders, the atomic checkpoint hook)."""
from __future__ import annotations

import os.path as osp
from contextlib import contextmanager

import pytest
from mmcv.transforms import LoadImageFromFile
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.hooks import CheckpointHook
from mmpretrain.models.classifiers import ImageClassifier
from mmseg.datasets.transforms import LoadAnnotations

from beit_mm.apis.export import model_kind
from beit_mm.apis.hub import hf_model_and_state_dict, model_parts
from beit_mm.apis.inference import (CLASSIFIER_INFERENCE_WEIGHTS, ENCODER_DECODER_INFERENCE_WEIGHTS,
                                    build_from_config, inference_weights, is_segmentor_config, model_class,
                                    segmentor_inference_weights)
from beit_mm.converters.hf_config import HFIncompatible, segmentation_hf_config
from beit_mm.data.checks import pipeline_loader, split_info
from beit_mm.engine.hooks.atomic_checkpoint import use_atomic_checkpoint_hook
from beit_mm.models.backbones.beit import BEiT
from beit_mm.models.segmentors.eomt import EoMT
from beit_mm.registry import MODELS

from .conftest import ROOT

SEG_CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')


class RenamedEoMT(EoMT):
    """An EoMT under another registry name (a variant a user registers)."""


class RenamedClassifier(ImageClassifier):
    """An mmpretrain ImageClassifier under another registry name."""


class RenamedBEiT(BEiT):
    """A BEiT under another registry name."""


@contextmanager
def registered(cls: type):
    """``cls`` registered in beit_mm's MODELS for the block; yields its scoped name ``beit_mm.<ClassName>``."""
    MODELS.register_module(module=cls)
    try:
        yield f'beit_mm.{cls.__name__}'
    finally:
        MODELS._module_dict.pop(cls.__name__)  # no public unregister: leave the registry as found


def _config(model_type, default_scope: str = 'mmseg', **model) -> Config:
    return Config(dict(default_scope=default_scope, model=dict(type=model_type, **model)))


def test_an_eomt_under_any_name_gets_the_weights_eomt_declares():
    """Only the config's type tells an EoMT (its config has no decode_head): a subclass and the class-as-type get the
    inference weights EoMT declares."""
    assert EoMT.inference_weights != ENCODER_DECODER_INFERENCE_WEIGHTS
    with registered(RenamedEoMT) as name:
        for cfg in (_config(name), _config('EoMT', default_scope='beit_mm'), _config(RenamedEoMT)):
            assert model_class(cfg) in (EoMT, RenamedEoMT)
            assert is_segmentor_config(cfg)
            assert inference_weights(cfg) == segmentor_inference_weights(cfg) == EoMT.inference_weights
            assert model_kind(cfg) == 'segmentor'


def test_foreign_classes_and_their_subclasses_get_their_base_class_weights():
    with registered(RenamedClassifier) as name:
        for cfg in (_config(name), _config('ImageClassifier', default_scope='mmpretrain'), _config(ImageClassifier)):
            assert not is_segmentor_config(cfg)
            assert inference_weights(cfg) == CLASSIFIER_INFERENCE_WEIGHTS
            assert model_kind(cfg) == 'classifier'
    seg = _config('EncoderDecoder')
    assert is_segmentor_config(seg) and inference_weights(seg) == ENCODER_DECODER_INFERENCE_WEIGHTS
    mim = _config('beit_mm.BEiTPretrain', default_scope='mmpretrain')
    assert inference_weights(mim) == ('', ) and model_kind(mim) == 'backbone'


def test_an_unregistered_model_type_is_named_with_the_fix():
    with pytest.raises(KeyError, match=r"model type 'NoSuchModel' is registered nowhere in scope 'mmseg'.*"
                                       r"Fix: spell it with its scope"):
        inference_weights(_config('NoSuchModel'))


def test_a_classifier_subclass_is_written_as_an_hf_classifier():
    with registered(RenamedClassifier) as name:
        model = MODELS.build(dict(
            type=name,
            backbone=dict(type='beit_mm.BEiT', arch=dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2.0),
                          img_size=32, patch_size=16, out_indices=(-1, ), final_norm=False),
            neck=dict(type='beit_mm.MeanPoolNeck', in_channels=32),
            head=dict(type='mmpretrain.LinearClsHead', num_classes=3, in_channels=32)))
    assert model_parts(model)[0] == 'classifier'
    cfg, state_dict = hf_model_and_state_dict(model, classes=['a', 'b', 'c'])
    assert cfg['architectures'] == ['BeitForImageClassification'] and cfg['id2label']['2'] == 'c'
    assert state_dict['classifier.weight'].shape == (3, 32) and 'beit.pooler.layernorm.weight' in state_dict


def test_a_beit_subclass_gets_the_hf_segmentation_checks():
    """The tiny segmentor takes its 4 levels from blocks 0-3 of 4; HF cannot select the last block."""
    cfg = Config.fromfile(SEG_CONFIG)
    with registered(RenamedBEiT) as name:
        cfg.model.backbone.type = name
        model = build_from_config(cfg)
    assert type(model.backbone) is RenamedBEiT
    with pytest.raises(HFIncompatible, match=r'out_indices \(0, 1, 2, 3\) use block\(s\) \[3\].*the last block cannot'):
        segmentation_hf_config(model)


class _Split:
    """The parts of an mmseg dataset that ``split_info`` reads: no files (the pipeline is what is tested)."""
    metainfo = {'classes': ('road', 'sky', 'tree')}
    ignore_index = 255
    reduce_zero_label = False

    def __init__(self, transforms: list) -> None:
        self.pipeline = Compose(transforms)

    def __len__(self) -> int:
        return 0


class TiledLoader(LoadImageFromFile):
    """A user's loader: mmcv's, with something added."""


class TiledAnnotations(LoadAnnotations):
    """A user's annotation loader: mmseg's, with something added."""


def test_subclasses_of_the_loaders_are_read_by_the_dataset_checks():
    split = _Split([TiledLoader(color_type='color_ignore_orientation', imdecode_backend='pillow'),
                    TiledAnnotations(reduce_zero_label=True)])
    assert pipeline_loader(split) == ('color_ignore_orientation', 'pillow')
    info = split_info(split, 'train')
    assert info.rule.reduce_zero_label and not info.applies_orientation  # the pipeline's, not the dataset's
    plain = _Split([LoadImageFromFile(), LoadAnnotations()])
    assert pipeline_loader(plain) == ('color', 'cv2') and not split_info(plain, 'train').rule.reduce_zero_label


class KeepBestHook(CheckpointHook):
    """A user's checkpoint hook: kept as it is."""


def _checkpoint_hook_after(hook_type, default_scope: str = 'mmseg'):
    cfg = Config(dict(default_scope=default_scope, default_hooks=dict(checkpoint=dict(type=hook_type, interval=2))))
    use_atomic_checkpoint_hook(cfg)
    assert cfg.default_hooks.checkpoint.interval == 2
    return cfg.default_hooks.checkpoint.type


def test_mmengines_checkpoint_hook_under_any_spelling_is_made_atomic():
    for hook_type, scope in (('CheckpointHook', 'mmseg'), ('mmengine.CheckpointHook', 'mmpretrain'),
                             (CheckpointHook, 'mmseg')):
        assert _checkpoint_hook_after(hook_type, scope) == 'beit_mm.AtomicCheckpointHook', hook_type
    assert _checkpoint_hook_after(KeepBestHook) is KeepBestHook
    assert _checkpoint_hook_after('beit_mm.AtomicCheckpointHook') == 'beit_mm.AtomicCheckpointHook'
