"""MMEngine's config text is formatted once per distinct text (beit_mm.engine.config_text), to the same string."""
import os.path as osp

from mmengine.config import Config
from yapf.yapflib.yapf_api import FormatCode

import beit_mm.engine.config_text as config_text

from ..conftest import ROOT

CONFIG = osp.join(ROOT, 'configs', 'demo', 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py')


def test_pretty_text_is_yapfs_and_formatted_once(monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0])
        return FormatCode(*args, **kwargs)

    config_text._format.cache_clear()
    monkeypatch.setattr(config_text, '_YAPF_FORMAT', counted)
    cfg = Config.fromfile(CONFIG)
    first = cfg.pretty_text
    assert cfg.pretty_text == first and Config.fromfile(CONFIG).pretty_text == first
    assert len(calls) == 1, 'the same text formatted again'
    expected, _ = FormatCode(calls[0], style_config=dict(based_on_style='pep8',
                                                         blank_line_before_nested_class_or_def=True,
                                                         split_before_expression_after_opening_paren=True))
    assert first == expected  # yapf's own output for MMEngine's style
    cfg.train_cfg.max_iters = 7
    assert 'max_iters=7' in cfg.pretty_text and len(calls) == 2  # another text: formatted
