"""EoMT checkpoints in the tools: ``tools/test.py`` refuses a checkpoint without the annealing state
(tue-mps/eomt @ 7bd19dd ``models/eomt.py:33,71-82``), and a trained EoMT fine-tunes on a new class set as
``load_ckpt_class_head=False`` does (``training/lightning_module.py:61,81-98,881-905``)."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from beit_mm.engine.resume import StartCheckpointError, check_start_checkpoint
from beit_mm.apis.convert import ConversionError, convert_checkpoint

from ..conftest import ROOT, load_tool

DEMO = osp.join(ROOT, 'configs', 'demo', 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py')


def demo_state_dict(cfg: Config, seed: int = 0) -> dict:
    """The config's EoMT built with seed ``seed``, annealing done (probabilities 0, as after training)."""
    from beit_mm.apis import build_from_config
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    model.attn_mask_probs.zero_()
    return model.state_dict()


def test_tools_test_refuses_eomt_checkpoint_without_annealing_state(ade_demo_root, tmp_path, capsys):
    """Without ``attn_mask_probs`` every masked block would mask at test time: ``tools/test.py`` exits 2 with one line
    naming the buffer and the fix, before any runner is built or anything written."""
    cfg = Config.fromfile(DEMO)
    state_dict = demo_state_dict(cfg)
    del state_dict['attn_mask_probs']
    path = str(tmp_path / 'no_probs.pth')
    torch.save({'state_dict': state_dict}, path)
    work = tmp_path / 'work'
    argv = [DEMO, path, '--work-dir', str(work), '--cfg-options',
            *[f'{loader}.dataset.data_root={ade_demo_root}' for loader in ('val_dataloader', 'test_dataloader')]]
    with pytest.raises(SystemExit) as exit_info:
        load_tool('tools/test.py').main(argv)
    assert exit_info.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith('test.py: error: ')]
    assert len(lines) == 1, lines
    assert 'attn_mask_probs' in lines[0] and 'Fix: ' in lines[0], lines[0]
    assert not work.exists()


# ---- fine-tuning a trained EoMT on a new class set -----------------------------------------------------------------
FINETUNE = osp.join(ROOT, 'configs', 'demo', 'eomt_beit-tiny-p8_ade20k-demo-pre_1xb8-0.3k_shapes-64x64.py')
HEAD = {'class_head.weight', 'class_head.bias'}


@pytest.fixture(scope='module')
def trained_demo(tmp_path_factory):
    """A trained demo EoMT (150 ADE20K classes) as tools/train.py saves it, and its copy without the class head made
    by ``tools/convert_checkpoint.py --model eomt --source beit_mm --drop-class-head``."""
    tmp = tmp_path_factory.mktemp('eomt_ft')
    weights = demo_state_dict(Config.fromfile(DEMO), seed=1)
    src, dst = str(tmp / 'iter_1000.pth'), str(tmp / 'eomt-demo_no-class-head.pth')
    torch.save({'state_dict': weights, 'meta': dict(iter=1000)}, src)
    convert_checkpoint(src, dst, model='eomt', source='beit_mm', drop_class_head=True)
    return weights, src, dst


def _finetune_runner(ade_demo_root: str, work_dir: str, load_from: str):
    from mmengine.runner import Runner
    cfg = Config.fromfile(FINETUNE)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = ade_demo_root
    cfg.work_dir, cfg.load_from = work_dir, load_from
    cfg.visualizer.pop('name')  # named after the runner: default_runtime's one name would be shared by two runners
    return Runner.from_cfg(cfg), cfg


def test_drop_class_head_keeps_every_other_weight(trained_demo):
    weights, _, dst = trained_demo
    start = torch.load(dst, map_location='cpu', weights_only=True)['state_dict']
    assert set(weights) - set(start) == HEAD and set(start) <= set(weights)
    assert all(torch.equal(start[k], weights[k]) for k in start)


def test_finetune_config_loads_everything_but_the_class_head(trained_demo, ade_demo_root, tmp_path):
    """The fine-tuning config (7 classes) from the 150-class demo model: every weight but the class head equals the
    checkpoint's; the class head has 7 + 1 outputs at the model's own init, as the official."""
    weights, _, dst = trained_demo
    runner, cfg = _finetune_runner(ade_demo_root, str(tmp_path / 'work'), dst)
    built_head = {k: v.clone() for k, v in runner.model.state_dict().items() if k in HEAD}
    check_start_checkpoint(runner, cfg)
    runner.load_or_resume()
    own = runner.model.state_dict()
    assert set(own) - set(weights) == set() and {k for k in own if not torch.equal(own[k], weights[k])
                                                if own[k].shape == weights[k].shape} == set()
    assert {k for k in own if k not in HEAD} == set(weights) - HEAD
    width = weights['q.weight'].shape[1]
    assert own['class_head.weight'].shape == (7 + 1, width) and own['class_head.bias'].shape == (7 + 1, )
    assert weights['class_head.weight'].shape == (150 + 1, width)
    assert all(torch.equal(own[k], built_head[k]) for k in HEAD)


def test_finetune_start_refuses_a_file_with_the_old_class_head_or_without_another_weight(trained_demo, ade_demo_root,
                                                                                         tmp_path):
    """The 150-class file itself: refused, naming the class head and --drop-class-head. A start lacking any weight
    but the class head (here one backbone weight): refused, naming it, instead of training it from its init."""
    weights, src, dst = trained_demo
    runner, cfg = _finetune_runner(ade_demo_root, str(tmp_path / 'work'), src)
    with pytest.raises(StartCheckpointError, match=r'class_head\.weight \(151, 96\) vs \(8, 96\).*--drop-class-head'):
        check_start_checkpoint(runner, cfg)
    start = torch.load(dst, map_location='cpu', weights_only=True)['state_dict']
    del start['backbone.blocks.0.attn.qkv.weight']
    lacking = str(tmp_path / 'lacking.pth')
    torch.save({'state_dict': start}, lacking)
    cfg.load_from = lacking
    with pytest.raises(StartCheckpointError,
                       match=r'missing from the file: 1 \(backbone\.blocks\.0\.attn\.qkv\.weight\)'):
        check_start_checkpoint(runner, cfg)


def test_hf_weights_convert_without_the_class_head(tmp_path):
    """HF's EoMT names (``class_predictor``) -> beit_mm's without ``class_head``: the rest equals the plain conversion
    and fits a DINOv2-style EoMT with another class count (``check_weights_match`` with the model's
    ``class_set_weights``)."""
    from beit_mm.apis import build_from_config
    from beit_mm.apis.checkpoint import check_weights_match
    from beit_mm.converters.eomt import beit_mm_to_hf_eomt, hf_eomt_to_beit_mm
    from ..models.test_eomt_hf import tiny_config
    cfg = tiny_config()
    hf = beit_mm_to_hf_eomt(build_from_config(cfg).state_dict())
    src, dst = str(tmp_path / 'hf.pth'), str(tmp_path / 'no_head.pth')
    torch.save(hf, src)
    convert_checkpoint(src, dst, model='eomt', source='hf', drop_class_head=True)
    start = torch.load(dst, map_location='cpu', weights_only=True)['state_dict']
    full = hf_eomt_to_beit_mm(hf)
    assert set(full) - set(start) == HEAD and all(torch.equal(start[k], full[k]) for k in start)
    cfg.model.num_classes = 3
    model = build_from_config(cfg)
    check_weights_match(model, start, 'start', strict=True, may_lack=model.class_set_weights)
    with pytest.raises(ValueError, match='class_head'):
        check_weights_match(model, start, 'start', strict=True)


def test_drop_class_head_only_for_eomt(tmp_path):
    with pytest.raises(ConversionError, match='--drop-class-head applies to --model eomt only'):
        convert_checkpoint(str(tmp_path / 'a.pth'), str(tmp_path / 'b.pth'), model='beit', source='unilm',
                           drop_class_head=True)


def test_official_ade20k_panoptic_weights_convert_in_mmdets_class_order(tmp_path):
    """The official ADE20K panoptic EoMT keeps ADE20K's class order (tue-mps/eomt@7bd19dd datasets/ade20k_panoptic.py:
    18-181: label = ADE20K index); ``--class-order ade20k-panoptic`` puts its class head in beit_mm's data order
    (mmdet's, things first): the converted model's class logit ``i`` is the plain conversion's logit
    ``OFFICIAL_ORDER[i]`` (max |diff| <= 1e-6 on the same image), "no object" last, every other weight the same."""
    from beit_mm.apis import build_from_config
    from beit_mm.converters.eomt import beit_mm_to_hf_eomt
    from beit_mm.data.datasets.ade20k_panoptic import OFFICIAL_ORDER
    from ..models.test_eomt_hf import tiny_config
    cfg = tiny_config()
    cfg.model.num_classes = 150
    torch.manual_seed(0)
    src = str(tmp_path / 'hf.pth')
    torch.save(beit_mm_to_hf_eomt(build_from_config(cfg).state_dict()), src)
    plain, ordered = str(tmp_path / 'plain.pth'), str(tmp_path / 'ordered.pth')
    convert_checkpoint(src, plain, model='eomt', source='hf')
    load_tool('tools/convert_checkpoint.py').main(['--model', 'eomt', '--source', 'hf', '--class-order',
                                                   'ade20k-panoptic', src, ordered])
    logits = []
    image = torch.randn(1, 3, cfg.model.backbone.img_size, cfg.model.backbone.img_size)
    for path in (plain, ordered):
        model = build_from_config(cfg).eval()
        model.load_state_dict(torch.load(path, map_location='cpu', weights_only=True)['state_dict'])
        with torch.no_grad():
            logits.append(model.forward_predictions(image)[1][-1])
    index = torch.tensor(list(OFFICIAL_ORDER) + [150])
    assert (logits[1] - logits[0][..., index]).abs().max() <= 1e-6
    assert not torch.equal(logits[1], logits[0])
    torch.save(beit_mm_to_hf_eomt(build_from_config(tiny_config()).state_dict()), src)  # another class count
    with pytest.raises(ConversionError, match=r'class_head\.weight has \d+ rows; this class order needs 150'):
        convert_checkpoint(src, str(tmp_path / 'x.pth'), model='eomt', source='hf', class_order='ade20k-panoptic')
    with pytest.raises(ConversionError, match='not with --drop-class-head'):
        convert_checkpoint(src, str(tmp_path / 'x.pth'), model='eomt', source='hf', class_order='ade20k-panoptic',
                           drop_class_head=True)
