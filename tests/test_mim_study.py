"""tools/analysis/mim_study.py: the smoke run (every arm, 2 iterations per stage, tiny generated data), its baselines
and the config rewriting it relies on.

References: the majority-class baseline is recomputed from the label files with NumPy (mIoU of predicting one class =
its pixel share / number of classes present); patch labels by an explicit per-patch count; the iteration rescaling
by the rules written in the tool's docstring.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
from mmengine.config import Config
from PIL import Image

from beit_mm.data.demo import make_demo_ade20k
from beit_mm.evaluation import probe as P

from .conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, 'tools', 'analysis'))
import mim_study  # noqa: E402


def make_data(tmp_path):
    labeled = make_demo_ade20k(str(tmp_path / 'shapes'), 8, 4, 64, seed=0, style='shapes')
    unlabeled = make_demo_ade20k(str(tmp_path / 'pool'), 16, 0, 64, seed=1, style='shapes', with_annotations=False)
    return labeled, unlabeled


def test_shapes_style_needs_the_outline():
    """Every class appears in many colours: the mean colour of a class's pixels varies across images about as much as
    the colours of the whole image do, unlike the 'classes' style where colour names the class."""
    rng = np.random.default_rng(0)
    from beit_mm.data.demo import SAMPLERS
    spread = {}
    for style in ('shapes', 'classes'):
        per_class = {}
        for _ in range(60):
            image, labels = SAMPLERS[style](64, rng)
            for c in np.unique(labels):
                per_class.setdefault(int(c), []).append(image[labels == c].mean(0))
        spread[style] = np.mean([np.std(v, axis=0).mean() for v in per_class.values() if len(v) > 5])
    assert spread['shapes'] > 40 and spread['classes'] < 25, spread


def datasets(root: str, limit=None, **suffixes):
    return (P.build_seg_dataset(P.ade20k_dataset_cfg(root, 'training', 7, limit=limit, **suffixes)),
            P.build_seg_dataset(P.ade20k_dataset_cfg(root, 'validation', 7, **suffixes)))


def test_majority_baseline(tmp_path):
    labeled, _ = make_data(tmp_path)
    base = mim_study.majority_baseline(*datasets(labeled))
    hist = lambda split: sum(np.bincount(np.asarray(Image.open(os.path.join(labeled, 'annotations', split, f))).ravel(),  # noqa: E731
                                         minlength=8) for f in os.listdir(os.path.join(labeled, 'annotations', split)))
    train, val = hist('training')[1:8], hist('validation')[1:8]
    share = val[train.argmax()] / val.sum()
    assert abs(base['mIoU'] - 100 * share / (val > 0).sum()) < 1e-9 and abs(base['aAcc'] - 100 * share) < 1e-9


def test_num_labeled_keeps_the_first_n_training_images(tmp_path):
    """``--num-labeled 3``: fine-tuning builds a dataset of the first 3 training pairs in file-name order, the
    majority baseline counts only their labels, and validation keeps every image."""
    import argparse

    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS
    labeled, unlabeled = make_data(tmp_path)
    args = argparse.Namespace(labeled_root=labeled, unlabeled_root=unlabeled, num_classes=7, num_labeled=3,
                              img_suffix=None, seg_map_suffix=None, workers=0, arms=['scratch'], heads=['linear'],
                              dvae_iters=2, mim_iters=2, ft_iters=2, ft_keep_init=[],
                              work_dir=str(tmp_path / 'study'))
    cfg = Config.fromfile(mim_study.study_configs(args)['finetune-linear'])
    init_default_scope('mmseg')
    train = DATASETS.build(cfg.train_dataloader.dataset)
    val = DATASETS.build(cfg.val_dataloader.dataset)
    first = sorted(os.listdir(os.path.join(labeled, 'images', 'training')))[:3]
    assert [os.path.basename(train.get_data_info(i)['img_path']) for i in range(len(train))] == first
    assert len(val) == 4
    # the first 3 label maps say raw class 5 everywhere: the majority of the subset, not of the whole set
    for f in first:
        path = os.path.join(labeled, 'annotations', 'training', f.replace('.jpg', '.png'))
        Image.fromarray(np.full_like(np.asarray(Image.open(path)), 5)).save(path)
    assert mim_study.majority_baseline(*datasets(labeled))['majority_class'] == 0  # background (raw 1), 8 images
    assert mim_study.majority_baseline(*datasets(labeled, limit=3))['majority_class'] == 4


def test_eomt_arm_takes_the_class_count_and_iterations(tmp_path):
    """``--heads eomt --num-classes 5 --ft-iters 600``: the EoMT segmentor predicts 5 classes (it has no decode head
    to carry them) and its annealing steps are halved with the run."""
    import argparse
    labeled, unlabeled = make_data(tmp_path)
    args = argparse.Namespace(labeled_root=labeled, unlabeled_root=unlabeled, num_classes=5, num_labeled=None,
                              img_suffix=None, seg_map_suffix=None, workers=0, arms=['scratch'], heads=['eomt'],
                              dvae_iters=2, mim_iters=2, ft_iters=600, ft_keep_init=[],
                              work_dir=str(tmp_path / 'study'))
    cfg = Config.fromfile(mim_study.study_configs(args)['finetune-eomt'])
    assert cfg.model.num_classes == 5 and len(cfg.train_dataloader.dataset.metainfo.classes) == 5
    assert cfg.model.mask_annealing.start_steps == [166, 332] and cfg.model.mask_annealing.end_steps == [332, 498]


def test_mask2former_arm_takes_the_class_count_and_trains(tmp_path):
    """``--heads mask2former --num-classes 9`` (the shapes' 7 classes and 2 absent ones): the written config's
    Mask2FormerHead predicts 9 classes with 9 class weights and the no-object one (mmdet's cross-entropy needs
    num_classes + 1), and it trains 2 iterations through tools/train.py on the study's data layout."""
    import argparse
    labeled, unlabeled = make_data(tmp_path)
    args = argparse.Namespace(labeled_root=labeled, unlabeled_root=unlabeled, num_classes=9, num_labeled=None,
                              img_suffix=None, seg_map_suffix=None, workers=0, arms=['scratch'],
                              heads=['mask2former'], dvae_iters=2, mim_iters=2, ft_iters=2, ft_keep_init=[],
                              work_dir=str(tmp_path / 'study'))
    path = mim_study.study_configs(args)['finetune-mask2former']
    cfg = Config.fromfile(path)
    head = cfg.model.decode_head
    assert head.num_classes == 9 and head.loss_cls.class_weight == [1.0] * 9 + [0.1]
    assert cfg.train_cfg.max_iters == 2
    cfg.model.backbone.init_cfg = None  # from scratch, as the study's scratch arm
    cfg.train_dataloader.batch_size = 2
    cfg.work_dir = str(tmp_path / 'work')
    cfg.dump(path)
    proc = subprocess.run([sys.executable, 'tools/train.py', path], cwd=ROOT, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert re.search(r'Iter\(train\) \[2/2\]', log) and re.search(r'mIoU: \d', log), log[-2000:]


def test_probe_warnings_flag_pretraining_that_does_not_beat_random_init():
    """Issue 27, item 4: the study names a pretrained arm whose frozen probe is within 1 mIoU point of random init
    (as on the digits: 4.41 vs 4.57); the reference numbers are worked out by hand."""
    def arm(probes, pretrained=True):
        return dict(pretrain=[dict(loss=0.0)] if pretrained else [], probe=[dict(probe_mIoU=v) for v in probes])

    results = {'scratch': arm([4.5, 4.64], pretrained=False),  # random init: mean 4.57
               'pixels-blockwise': arm([4.41]),                 # -0.16: flagged
               'tokens-blockwise': arm([5.5]),                  # +0.93 < 1: flagged
               'vqkd-blockwise': arm([5.6, 5.6])}               # +1.03: learned
    lines = mim_study.probe_warnings(results)
    assert [line.split(':')[0] for line in lines] == ['- WARNING pixels-blockwise', '- WARNING tokens-blockwise']
    assert 'probe mIoU 4.41 vs 4.57 at random init (gain -0.16 < 1)' in lines[0]
    assert mim_study.probe_warnings({k: v for k, v in results.items() if k != 'scratch'}) == []


def test_a_cut_run_resumes_only_with_the_same_config_and_options(tmp_path, monkeypatch):
    """A study run cut short (a killed job, the end of a session) continues from its checkpoints when the study calls
    it again with the same config text and options; anything else starts over (not a resume into another recipe)."""
    calls = []
    monkeypatch.setattr(mim_study.subprocess, 'run', lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, 'loss: 1.0', ''))
    config, work = tmp_path / 'mim.py', str(tmp_path / 'run')
    config.write_text('max_iters = 3000\n')
    mode = lambda: [a for a in calls[-1] if a in ('--resume', '--overwrite')]  # noqa: E731
    mim_study.train(str(config), work, ['randomness.seed=0'])
    assert mode() == ['--overwrite']
    mim_study.train(str(config), work, ['randomness.seed=0'])
    assert mode() == ['--resume']
    mim_study.train(str(config), work, ['randomness.seed=1'])
    assert mode() == ['--overwrite']
    config.write_text('max_iters = 1000\n')
    mim_study.train(str(config), work, ['randomness.seed=1'])
    assert mode() == ['--overwrite']
    mim_study.train(str(config), work, ['randomness.seed=1'])
    assert mode() == ['--resume']


def test_rescale_iterations():
    cfg = Config.fromfile(os.path.join(ROOT, 'configs', 'mim_study', 'dvae-tiny-v256_1xb32-1k_64px.py'))
    old, warmup = cfg.train_cfg.max_iters, cfg.param_scheduler[0].end
    tau, beta, every = (cfg.custom_hooks[0].temperature_iters, cfg.custom_hooks[0].kl_weight_iters,
                        cfg.custom_hooks[1].interval)
    save_every = cfg.default_hooks.checkpoint.interval
    mim_study.rescale_iterations(cfg, old // 4)
    assert cfg.train_cfg.max_iters == old // 4
    assert cfg.param_scheduler[0].end == round(warmup / 4) and cfg.param_scheduler[1].end == old // 4
    assert cfg.custom_hooks[0].temperature_iters == round(tau / 4)
    assert cfg.custom_hooks[0].kl_weight_iters == round(beta / 4) and cfg.custom_hooks[1].interval == round(every / 4)
    assert cfg.default_hooks.checkpoint.interval == round(save_every / 4)
    mim_study.rescale_iterations(cfg, 2)
    for s in cfg.param_scheduler:
        assert 0 <= s.begin < s.end <= 2


def test_rescale_iterations_moves_eomt_annealing():
    """EoMT's annealing steps scale with the run (the study's eomt arm at another --ft-iters), each end after its
    start."""
    cfg = Config.fromfile(mim_study.FT_CONFIGS['eomt'])
    assert cfg.model.mask_annealing.start_steps == [332, 664] and cfg.model.mask_annealing.end_steps == [664, 996]
    mim_study.rescale_iterations(cfg, 3600)
    assert cfg.model.mask_annealing.start_steps == [996, 1992] and cfg.model.mask_annealing.end_steps == [1992, 2988]
    mim_study.rescale_iterations(cfg, 2)
    annealing = cfg.model.mask_annealing
    assert all(1 <= a < b <= 2 for a, b in zip(annealing.start_steps, annealing.end_steps)), annealing


def test_study_smoke_run_every_arm(tmp_path):
    labeled, unlabeled = make_data(tmp_path)
    work = tmp_path / 'study'
    cmd = [sys.executable, 'tools/analysis/mim_study.py', '--labeled-root', labeled, '--unlabeled-root', unlabeled,
           '--num-classes', '7', '--seeds', '0', '1', '--dvae-iters', '2', '--mim-iters', '2', '--ft-iters', '2',
           '--vqkd-iters', '2', '--heads', 'linear', 'upernet', '--workers', '0', '--work-dir', str(work)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    report = json.loads((work / 'report.json').read_text())
    assert list(report['results']) == ['scratch', 'tokens-blockwise', 'pixels-blockwise', 'tokens-random',
                                       'vqkd-blockwise']
    for arm, res in report['results'].items():
        for head in ('linear', 'upernet'):
            runs = res['finetune'][head]
            assert len(runs) == 2 and all(0 <= r['mIoU'] <= 100 for r in runs), (arm, head)
        assert len(res['probe']) == 1 and 0 <= res['probe'][0]['probe_mIoU'] <= 100
        assert 0 <= res['probe'][0]['knn_acc'] <= 100
    assert 'mim_acc_baseline' in report['results']['tokens-random']['pretrain'][0]
    assert 'loss_baseline' in report['results']['pixels-blockwise']['pretrain'][0]
    assert 0 < report['tokenizer']['usage'] <= 1 and os.path.isfile(report['tokenizer']['grid'])
    # vqkd-blockwise: a VQ-KD distilled from the pixel arm's backbone (the default --vqkd-teacher), its ids the targets
    vqkd = report['vqkd']
    assert 0 < vqkd['usage'] <= 1 and 0 <= vqkd['teacher_cosine'] <= 1
    assert vqkd['teacher_checkpoint'] == report['results']['pixels-blockwise']['pretrain'][0]['checkpoint']
    assert 'mim_acc_baseline' in report['results']['vqkd-blockwise']['pretrain'][0]
    assert (work / 'vqkd_tokenizer.pth').is_file()
    text = (work / 'report.md').read_text()
    assert text.count('| trivial baseline (majority class) |') == 3  # the probe's and each head's
    # every MIM run logged the dense probe curve (DenseProbeHook in the study configs, iteration 0 and 2 checks)
    curve = json.loads((work / 'mim' / 'pixels-blockwise_seed0' / 'dense_probe.json').read_text())
    assert curve['init'] is not None and [c['iter'] for c in curve['history']] == [1, 2]
    assert '| tokens-random |' in text
    for head in ('linear', 'upernet'):
        for arm in ('tokens-blockwise', 'pixels-blockwise', 'tokens-random', 'vqkd-blockwise'):
            assert f'- {head}: {arm} - scratch = ' in text, (head, arm)
    assert 'VQ-KD tokenizer of vqkd-blockwise' in text
    assert (work / 'probe_curves.png').is_file()  # every MIM arm's probe curve in one picture
    # the pixel arm needs no tokenizer; the configs the runs used are kept
    assert (work / 'configs' / 'finetune_linear.py').is_file() and (work / 'configs' / 'finetune_upernet.py').is_file()
    assert (work / 'configs' / 'mim_pixels-blockwise.py').is_file()
    # finished runs are reused: a second start does no training
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0 and json.loads((work / 'report.json').read_text())['results'] == report['results']
    # other settings in the same work dir: refused with the folder and the fix, nothing overwritten
    fewer = subprocess.run(cmd + ['--num-labeled', '4'], cwd=ROOT, capture_output=True, text=True)
    assert fewer.returncode != 0
    message = fewer.stderr[-3000:]
    assert 'holds a finished run with other settings (num_labeled: None there, 4 now)' in message, message
    assert 'Fix: start the study with another --work-dir' in message
    assert json.loads((work / 'report.json').read_text())['results'] == report['results']
    # a fine-tuning variant on the same pretraining (--pretrain-dir): no tokenizer or MIM run again, options applied
    variant = tmp_path / 'variant'
    ld = 'optim_wrapper.paramwise_cfg.layer_decay_rate=0.65'
    proc = subprocess.run(cmd[:cmd.index('--seeds')] + [
        '--seeds', '0', '--mim-iters', '2', '--ft-iters', '2', '--vqkd-iters', '2', '--arms', 'scratch',
        'vqkd-blockwise', '--heads', 'upernet', 'eomt', '--workers', '0', '--work-dir', str(variant),
        '--pretrain-dir', str(work), '--ft-options', ld], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert not (variant / 'mim').exists() and not (variant / 'vqkd').exists()
    runs = variant / 'finetune' / 'upernet'
    assert sorted(os.listdir(runs)) == ['scratch_seed0', 'vqkd-blockwise_seed0']
    assert json.loads((runs / 'scratch_seed0' / 'metrics.json').read_text())['settings']['ft_options'] == [ld]
    assert 'layer_decay_rate=0.65' in (runs / 'vqkd-blockwise_seed0' / 'train.log').read_text()
    # the EoMT head on the same starts: the MIM checkpoint (final norm included) loads into its backbone
    eomt = variant / 'finetune' / 'eomt'
    assert sorted(os.listdir(eomt)) == ['scratch_seed0', 'vqkd-blockwise_seed0']
    log = (eomt / 'vqkd-blockwise_seed0' / 'train.log').read_text()
    assert 'attn_mask_prob_0' in log and 'loss_dice_block_-1' in log
    assert re.search(r'loaded \d+ backbone weights from \S+vqkd-blockwise_seed0\S+ \(0 missing', log), log[-3000:]
    cfg = Config.fromfile(str(variant / 'configs' / 'finetune_eomt.py'))
    assert cfg.model.mask_annealing.end_steps == [2, 2]  # rescaled to 2 iterations (class count: the test above)


def rename_files(root: str, image_suffix: str = '.jpg') -> None:
    """Give every file of an ADE20K-layout root another name (00000.jpg / 00000.png, in the old order); images get
    ``image_suffix`` (re-encoded when it is not .jpg)."""
    for kind in ('images', 'annotations'):
        for split in ('training', 'validation'):
            folder = os.path.join(root, kind, split)
            if not os.path.isdir(folder):
                continue
            for i, name in enumerate(sorted(os.listdir(folder))):
                path = os.path.join(folder, name)
                if kind == 'images' and image_suffix != '.jpg':
                    Image.open(path).save(os.path.join(folder, f'{i:05d}{image_suffix}'))
                    os.remove(path)
                else:
                    os.rename(path, os.path.join(folder, f'{i:05d}{os.path.splitext(name)[1]}'))


def test_study_on_other_file_names_and_the_wrong_suffix_error(tmp_path):
    """A labeled root named 00000.jpg / 00000.png (which mmseg's ADE20KDataset reads) and an unlabeled pool of .png
    files: the study's smoke run (scratch and the pixel arm, 2 iterations) finishes; the labeled images re-encoded as
    .png stop it at once with what was looked for, where, and what was found."""
    labeled, unlabeled = make_data(tmp_path)
    rename_files(labeled)
    rename_files(unlabeled, '.png')
    assert sorted(os.listdir(os.path.join(labeled, 'images', 'validation'))) == [f'{i:05d}.jpg' for i in range(4)]
    work = tmp_path / 'study'
    cmd = [sys.executable, 'tools/analysis/mim_study.py', '--labeled-root', labeled, '--unlabeled-root', unlabeled,
           '--num-classes', '7', '--seeds', '0', '--arms', 'scratch', 'pixels-blockwise', '--mim-iters', '2',
           '--ft-iters', '2', '--workers', '0', '--work-dir', str(work)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    report = json.loads((work / 'report.json').read_text())
    for arm in ('scratch', 'pixels-blockwise'):
        assert 0 <= report['results'][arm]['finetune']['linear'][0]['mIoU'] <= 100
        assert 0 <= report['results'][arm]['probe'][0]['probe_mIoU'] <= 100
    # the same labels with .png images: the default suffix (.jpg) finds none, and the message says what it found
    rename_files(labeled, '.png')
    wrong = subprocess.run(cmd[:-1] + [str(tmp_path / 'study_png')], cwd=ROOT, capture_output=True, text=True)
    assert wrong.returncode != 0
    message = wrong.stderr.strip().splitlines()[-1]
    assert message.startswith(f'mim_study: 0 images matched *.jpg in {labeled}/images/training; found 8 *.png. '
                              'Fix: pass the suffix'), message
    scratch = [a for a in cmd[:-1] if a != 'pixels-blockwise'] + [str(tmp_path / 'study_png'), '--img-suffix', '.png']
    fixed = subprocess.run(scratch, cwd=ROOT, capture_output=True, text=True)
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-4000:]
