"""EoMT checkpoints in the tools: ``tools/test.py`` refuses a checkpoint without the annealing state, and a trained
EoMT (beit_mm's or HF's weights) fine-tunes on a new class set.

References (github.com/tue-mps/eomt @ 7bd19dd): the buffer ``attn_mask_probs = ones(num_blocks)`` decides whether a
masked block masks (``models/eomt.py:33,71-82``), so a checkpoint without it masks in every block, which no trained
EoMT does; ``load_ckpt_class_head=False`` (``training/lightning_module.py:61,81-98,881-905``, README "To fine-tune a
pre-trained EoMT model") loads everything but ``class_head`` strictly and keeps the new model's own class head.
"""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from .conftest import ROOT
from .test_tools import _load_tool

DEMO = osp.join(ROOT, 'configs', 'eomt', 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')


def demo_state_dict(cfg: Config, seed: int = 0) -> dict:
    """The config's EoMT built with seed ``seed``, annealing done (probabilities 0, as after training)."""
    from beit_mm.apis import build_from_config
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    model.attn_mask_probs.zero_()
    return model.state_dict()


def test_tools_test_refuses_eomt_checkpoint_without_annealing_state(data_root, tmp_path, capsys):
    """Without ``attn_mask_probs`` the model would keep its init (all 1): every masked block masks at test time, a
    model that was never trained. ``tools/test.py`` refuses it with exit 2 and one line naming the buffer and the fix,
    before any runner is built or anything is written."""
    cfg = Config.fromfile(DEMO)
    state_dict = demo_state_dict(cfg)
    del state_dict['attn_mask_probs']
    path = str(tmp_path / 'no_probs.pth')
    torch.save({'state_dict': state_dict}, path)
    work = tmp_path / 'work'
    argv = [DEMO, path, '--work-dir', str(work), '--cfg-options',
            *[f'{loader}.dataset.data_root={data_root}' for loader in ('val_dataloader', 'test_dataloader')]]
    with pytest.raises(SystemExit) as exit_info:
        _load_tool('test').main(argv)
    assert exit_info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith('test.py: error: ')]
    assert len(lines) == 1, lines
    assert 'attn_mask_probs' in lines[0] and 'Fix: ' in lines[0], lines[0]
    assert not work.exists()
