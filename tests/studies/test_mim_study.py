"""beit_mm.studies in-process: config edits, run cache and resume, job graph, report, probe warning and recommendation,
and one end-to-end run of tools/analysis/mim_study.py started twice to show every run reused. The majority-class
baseline is recomputed from the label files with NumPy; the report's numbers are worked out by hand."""
import argparse
import json
import os
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest
from mmengine.config import Config
from PIL import Image

from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.data.datasets import labeled_sets as D
from beit_mm.studies import configs as C
from beit_mm.studies import graph, mim, runs
from beit_mm.studies import report as R
from beit_mm.studies.settings import MimStudySettings, StudySettingsError

from ..conftest import ROOT

TOOL_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get('PYTHONPATH')))))


def shipped(rel_path: str) -> str:
    return C.shipped_config(C.default_config_dir(), rel_path)


def make_data(tmp_path):
    labeled = make_demo_ade20k(str(tmp_path / 'shapes'), 8, 4, 64, seed=0, style='shapes')
    unlabeled = make_demo_ade20k(str(tmp_path / 'pool'), 16, 0, 64, seed=1, style='shapes', with_annotations=False)
    return labeled, unlabeled


def study_args(tmp_path, labeled: str, unlabeled: str, **changes) -> MimStudySettings:
    """The study's settings for these roots: 2 iterations a stage, one seed, the scratch arm and the linear decoder,
    no workers, otherwise tools/analysis/mim_study.py's defaults; ``changes`` replace any."""
    args = dict(labeled_root=labeled, unlabeled_root=unlabeled, num_classes=7, num_labeled=None, seeds=[0],
                pretrain_seeds=1, arms=['scratch'], vqkd_teacher='pixels-blockwise', vqkd_iters=2,
                vqkd_dead_code_ratio=0.1, teacher_labeled_root=None, teacher_num_classes=None, teacher_head='linear',
                teacher_iters=2, ft_options=[], ft_keep_init=[], heads=['linear'], dvae_iters=2, mim_iters=2,
                ft_iters=2, work_dir=str(tmp_path / 'study'), img_suffix=None, seg_map_suffix=None, workers=0, jobs=1)
    args.update(changes)
    return MimStudySettings(**args)


def test_settings_are_checked_and_made_absolute(tmp_path, monkeypatch):
    """The settings refuse what the study cannot run with (the CLI's messages) and make roots absolute, whatever
    the current folder is later."""
    monkeypatch.chdir(tmp_path)
    settings = MimStudySettings('l', 'u', 7, work_dir='w', ft_iters=5)
    assert (settings.labeled_root, settings.pretrain_dir, settings.teacher_iters) == (str(tmp_path / 'l'),
                                                                                      str(tmp_path / 'w'), 5)
    with pytest.raises(StudySettingsError, match='the vqkd-supervised arm needs --teacher-labeled-root'):
        MimStudySettings('l', 'u', 7, arms=['scratch', 'vqkd-supervised'])
    with pytest.raises(StudySettingsError, match='--heads segformer: not one of linear'):
        MimStudySettings('l', 'u', 7, heads=['segformer'])


# ------------------------------------------------------------------------------------------------ data, configs
def test_shapes_style_needs_the_outline():
    """Every class appears in many colours: the mean colour of a class's pixels varies across images about as much as
    the colours of the whole image do, unlike the 'classes' style where colour names the class."""
    rng = np.random.default_rng(0)
    from beit_mm.data.demo.ade20k import SAMPLERS
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
    return (D.build_seg_dataset(D.ade20k_dataset_cfg(root, 'training', 7, limit=limit, **suffixes)),
            D.build_seg_dataset(D.ade20k_dataset_cfg(root, 'validation', 7, **suffixes)))


def test_majority_baseline(tmp_path):
    labeled, _ = make_data(tmp_path)
    base = R.majority_baseline(*datasets(labeled))
    hist = lambda split: sum(np.bincount(np.asarray(Image.open(os.path.join(labeled, 'annotations', split, f))).ravel(),  # noqa: E731
                                         minlength=8) for f in os.listdir(os.path.join(labeled, 'annotations', split)))
    train, val = hist('training')[1:8], hist('validation')[1:8]
    share = val[train.argmax()] / val.sum()
    assert abs(base['mIoU'] - 100 * share / (val > 0).sum()) < 1e-9 and abs(base['aAcc'] - 100 * share) < 1e-9


def test_num_labeled_keeps_the_first_n_training_images(tmp_path):
    """``--num-labeled 3``: fine-tuning builds a dataset of the first 3 training pairs in file-name order, the
    majority baseline counts only their labels, and validation keeps every image."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import DATASETS
    labeled, unlabeled = make_data(tmp_path)
    cfg = Config.fromfile(C.study_configs(study_args(tmp_path, labeled, unlabeled, num_labeled=3))['finetune-linear'])
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
    assert R.majority_baseline(*datasets(labeled))['majority_class'] == 0  # background (raw 1), 8 images
    assert R.majority_baseline(*datasets(labeled, limit=3))['majority_class'] == 4


def test_eomt_arm_takes_the_class_count_and_iterations(tmp_path):
    """``--heads eomt --num-classes 5 --ft-iters 600``: the EoMT segmentor predicts 5 classes (it has no decode head
    to carry them) and its annealing steps are halved with the run."""
    labeled, unlabeled = make_data(tmp_path)
    args = study_args(tmp_path, labeled, unlabeled, num_classes=5, heads=['eomt'], ft_iters=600)
    cfg = Config.fromfile(C.study_configs(args)['finetune-eomt'])
    assert cfg.model.num_classes == 5 and len(cfg.train_dataloader.dataset.metainfo.classes) == 5
    assert cfg.model.mask_annealing.start_steps == [166, 332] and cfg.model.mask_annealing.end_steps == [332, 498]


def test_mask2former_arm_takes_the_class_count(tmp_path):
    """``--heads mask2former --num-classes 9``: the written config's Mask2FormerHead predicts 9 classes with 9 + 1 class
    weights, on the study's data roots and iterations."""
    labeled, unlabeled = make_data(tmp_path)
    args = study_args(tmp_path, labeled, unlabeled, num_classes=9, heads=['mask2former'])
    cfg = Config.fromfile(C.study_configs(args)['finetune-mask2former'])
    head = cfg.model.decode_head
    assert head.num_classes == 9 and head.loss_cls.class_weight == [1.0] * 9 + [0.1]
    assert cfg.train_cfg.max_iters == 2 and cfg.train_dataloader.dataset.data_root == labeled


def test_study_configs_point_every_run_at_the_study(tmp_path):
    """Every arm's config: the MIM runs read the unlabeled pool and their tokenizer from the pretraining dir, probe the
    labeled set with only the labels the study may use; vqkd-supervised's teacher learns the other dataset."""
    labeled, unlabeled = make_data(tmp_path)
    args = study_args(tmp_path, labeled, unlabeled, num_labeled=3, arms=list(C.ARMS),
                      pretrain_dir=str(tmp_path / 'pre'), teacher_labeled_root=str(tmp_path / 'other'),
                      teacher_num_classes=10, teacher_iters=4, ft_keep_init=['gamma_'])
    paths = C.study_configs(args)
    assert set(paths) == {'dvae', 'finetune-linear', 'vqkd', 'teacher', 'vqkd_supervised', *C.ARMS[1:]}
    assert all(p.startswith(str(tmp_path / 'study' / 'configs')) for p in paths.values())
    for arm, tokenizer in (('tokens-blockwise', 'tokenizer.pth'), ('vqkd-blockwise', 'vqkd_tokenizer.pth'),
                           ('vqkd-supervised', 'vqkd_supervised_tokenizer.pth')):
        cfg = Config.fromfile(paths[arm])
        assert cfg.model.target_generator.init_cfg.checkpoint == str(tmp_path / 'pre' / tokenizer), arm
        assert cfg.train_dataloader.dataset.data_root == unlabeled and cfg.train_cfg.max_iters == 2
        hook = next(h for h in cfg.custom_hooks if h.type == 'beit_mm.DenseProbeHook')
        assert (hook.data_root, hook.num_classes, hook.num_train) == (labeled, 7, 3)
    teacher = Config.fromfile(paths['teacher'])
    assert teacher.train_dataloader.dataset.data_root == str(tmp_path / 'other') and teacher.train_cfg.max_iters == 4
    assert teacher.model.decode_head.num_classes == 10 and teacher.model.backbone.init_cfg is None
    assert 'indices' not in teacher.train_dataloader.dataset  # the other dataset's labels are all the teacher's
    assert Config.fromfile(paths['finetune-linear']).model.backbone.init_cfg.keep_init == ['gamma_']
    assert Config.fromfile(paths['vqkd_supervised']).model.teacher.backbone.out_indices == (5, )
    assert C.pretrained_arms(study_args(tmp_path, labeled, unlabeled, arms=['scratch', 'vqkd-blockwise'])) == [
        'pixels-blockwise', 'vqkd-blockwise']  # the VQ-KD's teacher arm is pretrained too


def test_rescale_iterations():
    cfg = Config.fromfile(shipped(C.DVAE_CONFIG))
    old, warmup = cfg.train_cfg.max_iters, cfg.param_scheduler[0].end
    tau, beta, every = (cfg.custom_hooks[0].temperature_iters, cfg.custom_hooks[0].kl_weight_iters,
                        cfg.custom_hooks[1].interval)
    save_every = cfg.default_hooks.checkpoint.interval
    C.rescale_iterations(cfg, old // 4)
    assert cfg.train_cfg.max_iters == old // 4
    assert cfg.param_scheduler[0].end == round(warmup / 4) and cfg.param_scheduler[1].end == old // 4
    assert cfg.custom_hooks[0].temperature_iters == round(tau / 4)
    assert cfg.custom_hooks[0].kl_weight_iters == round(beta / 4) and cfg.custom_hooks[1].interval == round(every / 4)
    assert cfg.default_hooks.checkpoint.interval == round(save_every / 4)
    C.rescale_iterations(cfg, 2)
    for s in cfg.param_scheduler:
        assert 0 <= s.begin < s.end <= 2


def test_rescale_iterations_moves_eomt_annealing():
    """EoMT's annealing steps scale with the run (the study's eomt arm at another --ft-iters), each end after its
    start."""
    cfg = Config.fromfile(shipped(C.FT_CONFIGS['eomt']))
    assert cfg.model.mask_annealing.start_steps == [332, 664] and cfg.model.mask_annealing.end_steps == [664, 996]
    C.rescale_iterations(cfg, 3600)
    assert cfg.model.mask_annealing.start_steps == [996, 1992] and cfg.model.mask_annealing.end_steps == [1992, 2988]
    C.rescale_iterations(cfg, 2)
    annealing = cfg.model.mask_annealing
    assert all(1 <= a < b <= 2 for a, b in zip(annealing.start_steps, annealing.end_steps)), annealing


# --------------------------------------------------------------------------------------------- runs and cache
def fake_training(calls: list, log: str = 'loss: 1.0', code: int = 0):
    """A stand-in for ``runs.start_training`` (the child process): records what it was asked, writes ``log`` where
    the child writes its output, returns ``code``."""
    def start(log_path, config, kwargs):
        calls.append((config, kwargs))
        with open(log_path, 'w') as f:
            f.write(log)
        return code
    return start


def test_a_cut_run_resumes_only_with_the_same_config_and_options(tmp_path, monkeypatch):
    """A study run cut short (a killed job, the end of a session) continues from its checkpoints when the study calls
    it again with the same config text and options; anything else starts over (not a resume into another recipe)."""
    calls = []
    monkeypatch.setattr(runs, 'start_training', fake_training(calls))
    config, work = tmp_path / 'mim.py', str(tmp_path / 'run')
    config.write_text('max_iters = 3000\n')
    mode = lambda: (calls[-1][1]['resume'], calls[-1][1]['overwrite'])  # noqa: E731
    assert runs.train(str(config), work, ['randomness.seed=0']) == 'loss: 1.0'
    assert mode() == (None, True) and calls[-1] == (str(config), dict(
        work_dir=work, resume=None, overwrite=True, cfg_options={'randomness.seed': 0}))
    runs.train(str(config), work, ['randomness.seed=0'])
    assert mode() == ('auto', False)
    runs.train(str(config), work, ['randomness.seed=1'])
    assert mode() == (None, True)
    config.write_text('max_iters = 1000\n')
    runs.train(str(config), work, ['randomness.seed=1'])
    assert mode() == (None, True)
    runs.train(str(config), work, ['randomness.seed=1'])
    assert mode() == ('auto', False)
    assert (tmp_path / 'run' / 'train.log').read_text() == 'loss: 1.0'


def test_a_failed_run_names_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr(runs, 'start_training', fake_training([], 'boom', 3))
    (tmp_path / 'c.py').write_text('x = 1\n')
    with pytest.raises(RuntimeError, match=rf'failed \(exit 3\); log {tmp_path}/run/train.log:\nboom'):
        runs.train(str(tmp_path / 'c.py'), str(tmp_path / 'run'), [])


def test_a_refused_run_is_reported_with_the_refusal(tmp_path):
    """The real child process (``beit_mm.apis.train.train`` in a spawned interpreter) on a config it refuses: the
    study's error carries the refusal as tools/train.py prints it, written to the run's train.log."""
    (tmp_path / 'c.py').write_text('x = 1\n')  # no model, no train_cfg
    with pytest.raises(RuntimeError, match=r'failed \(exit [12]\); log .*train.log:\n') as error:
        runs.train(str(tmp_path / 'c.py'), str(tmp_path / 'run'), [])
    assert (tmp_path / 'run' / 'train.log').read_text().strip()[-500:] in str(error.value)


def test_cached_reuses_a_finished_run_and_refuses_other_settings(tmp_path):
    """A finished run's metrics are reused with the same settings (the run is not called again); other settings in
    the same folder stop the study with the folder and the fix, and the stored metrics stay as they were."""
    work, calls = str(tmp_path / 'run'), []
    os.makedirs(work)

    def run():
        calls.append(1)
        return dict(mIoU=12.5)

    settings = dict(labeled_root='/data', num_labeled=None)
    first = runs.cached(work, run, settings)
    assert first['mIoU'] == 12.5 and first['settings'] == settings and first['seconds'] >= 0
    assert runs.cached(work, run, dict(settings)) == first and calls == [1]
    stored = (tmp_path / 'run' / 'metrics.json').read_text()
    with pytest.raises(RuntimeError) as error:
        runs.cached(work, run, dict(settings, num_labeled=4))
    assert str(error.value) == (f'{work} holds a finished run with other settings (num_labeled: None there, 4 now). '
                                'Fix: start the study with another --work-dir, or delete that folder to redo the run.')
    assert (tmp_path / 'run' / 'metrics.json').read_text() == stored and calls == [1]


def test_scalars_and_the_last_checkpoint(tmp_path):
    """The last value of a scalar over MMEngine's scalar files, the latest start of the run last (a resumed run
    writes a second ``<timestamp>/vis_data/scalars.json``)."""
    for stamp, lines in (('20261127_060000', [dict(loss=2.5, lr=1e-3, step=1), dict(mIoU=10.25, aAcc=50.0, step=1)]),
                         ('20261127_050000', [dict(loss=9.0, mAcc=3.0, step=1)]),
                         ('20261127_070000', [dict(loss=1.5e-2, step=2), dict(lr=1e-4, step=2)])):
        os.makedirs(tmp_path / stamp / 'vis_data')
        (tmp_path / stamp / 'vis_data' / 'scalars.json').write_text(''.join(json.dumps(x) + '\n' for x in lines))
    assert runs.last_scalar(str(tmp_path), 'loss') == 0.015 and runs.last_scalar(str(tmp_path), 'mIoU') == 10.25
    assert runs.last_scalar(str(tmp_path), 'mAcc') == 3.0
    with pytest.raises(RuntimeError, match=r'no scalar "mim_acc" in .*20261127_050000/vis_data/scalars.json'):
        runs.last_scalar(str(tmp_path), 'mim_acc')
    (tmp_path / 'last_checkpoint').write_text('/elsewhere/iter_2.pth\n')
    assert runs.last_checkpoint(str(tmp_path)) == str(tmp_path / 'iter_2.pth')
    os.makedirs(tmp_path / 'tokenizer_eval')
    for n in (2, 10, 9):
        (tmp_path / 'tokenizer_eval' / f'iter_{n}.json').write_text(json.dumps(dict(usage=n)))
    assert runs.last_tokenizer_eval(str(tmp_path)) == dict(usage=10)  # the largest iteration, not the last name


# ------------------------------------------------------------------------------------------------ the job graph
def test_run_graph_starts_the_critical_path_first():
    """One job at a time: of the ready tasks, the kind earliest in PRIORITY starts first; a task sees its
    dependencies' results."""
    order, seen = [], {}

    def task(name):
        def fn(done):
            order.append(name)
            seen[name] = sorted(done)
            return dict(value=float(len(order)))
        return fn

    tasks = {'probe/a/0': ([], task('probe/a/0')), 'pretrain/a/0': (['tokenizer'], task('pretrain/a/0')),
             'tokenizer': ([], task('tokenizer')), 'finetune/h/a/0': (['pretrain/a/0'], task('finetune/h/a/0'))}
    done = graph.run_graph(tasks, jobs=1)
    assert order == ['tokenizer', 'pretrain/a/0', 'finetune/h/a/0', 'probe/a/0']
    assert seen['finetune/h/a/0'] == ['pretrain/a/0', 'tokenizer'] and done['pretrain/a/0'] == dict(value=2.0)


def test_run_graph_runs_jobs_at_once_and_stops_on_errors():
    meet = threading.Barrier(2, timeout=20)  # both tasks must run at the same time to pass it

    def together(done):
        meet.wait()
        return {}

    assert set(graph.run_graph({'probe/a/0': ([], together), 'probe/b/0': ([], together)}, jobs=2)) == {
        'probe/a/0', 'probe/b/0'}
    with pytest.raises(RuntimeError, match=r"unresolvable dependencies: \['probe/a/0'\]"):
        graph.run_graph({'probe/a/0': (['tokenizer'], lambda done: {})}, jobs=1)

    def fail(done):
        raise ValueError('the run broke')

    with pytest.raises(ValueError, match='the run broke'):
        graph.run_graph({'tokenizer': ([], fail), 'probe/a/0': (['tokenizer'], lambda done: {})}, jobs=1)


def test_study_tasks_and_their_dependencies(tmp_path):
    """The job graph of three arms, 2 pretraining seeds and 3 fine-tuning seeds: one dVAE, the VQ-KD after its teacher
    arm's run 0, fine-tuning seed s from pretraining run s mod 2, scratch from nothing."""
    args = study_args(tmp_path, 'labeled', 'pool', arms=['scratch', 'tokens-blockwise', 'vqkd-blockwise'],
                      pretrain_seeds=2, seeds=[0, 1, 2])
    tasks = {name: deps for name, (deps, _) in mim.study_tasks(args, {}, None).items()}
    assert tasks['tokenizer'] == [] and tasks['vqkd'] == ['pretrain/pixels-blockwise/0']
    assert 'teacher' not in tasks and 'pretrain/pixels-blockwise/1' not in tasks
    assert tasks['pretrain/tokens-blockwise/1'] == ['tokenizer'] and tasks['pretrain/vqkd-blockwise/0'] == ['vqkd']
    assert tasks['finetune/linear/vqkd-blockwise/2'] == ['pretrain/vqkd-blockwise/0']
    assert tasks['finetune/linear/tokens-blockwise/1'] == ['pretrain/tokens-blockwise/1']
    assert tasks['finetune/linear/scratch/1'] == [] and tasks['probe/scratch/0'] == []
    assert tasks['probe/vqkd-blockwise/1'] == ['pretrain/vqkd-blockwise/1']
    assert not any(name.startswith('probe/pixels-blockwise') for name in tasks)
    assert len(tasks) == 1 + 1 + 1 + 4 + 5 + 9  # dVAE, VQ-KD, teacher arm, 4 MIM runs, 5 probes, 9 fine-tunings


def test_run_finetune_starts_from_the_right_weights(tmp_path, monkeypatch):
    """Scratch trains with ``init_cfg=None``, a MIM arm from its checkpoint with the recipe's extra options; the
    settings a fine-tuning result is cached with name what it depends on."""
    calls = []

    def fake_train(config, work, options):  # the run's scalar file, as MMEngine's LocalVisBackend writes it
        calls.append((config, work, options))
        os.makedirs(os.path.join(work, '20261127_060000', 'vis_data'))
        with open(os.path.join(work, '20261127_060000', 'vis_data', 'scalars.json'), 'w') as f:
            f.write(json.dumps(dict(mIoU=10.0, aAcc=50.0, mAcc=20.0, step=2)) + '\n')

    monkeypatch.setattr(mim, 'train', fake_train)
    args = study_args(tmp_path, '/labeled', '/pool', ft_options=['optimizer.lr=0.1'], ft_keep_init=['gamma_'],
                      pretrain_dir=str(tmp_path / 'pre'))
    configs = {'finetune-linear': 'ft.py'}
    scratch = mim.run_finetune(args, configs, 'linear', 'scratch', None, 1)
    assert calls[-1] == ('ft.py', str(tmp_path / 'study' / 'finetune' / 'linear' / 'scratch_seed1'),
                         ['randomness.seed=1', 'model.backbone.init_cfg=None', 'optimizer.lr=0.1'])
    assert (scratch['mIoU'], scratch['aAcc'], scratch['mAcc']) == (10.0, 50.0, 20.0)
    assert scratch['settings'] == dict(labeled_root='/labeled', num_classes=7, num_labeled=None, ft_iters=2, seed=1,
                                       mim_iters=None, ft_options=['optimizer.lr=0.1'])
    arm = mim.run_finetune(args, configs, 'linear', 'vqkd-blockwise', '/pre/iter_2.pth', 0)
    assert calls[-1][2][1] == 'model.backbone.init_cfg.checkpoint=/pre/iter_2.pth'
    assert arm['settings']['ft_keep_init'] == ['gamma_'] and arm['settings']['checkpoint'] == '/pre/iter_2.pth'
    assert arm['settings']['mim_iters'] == 2


# ------------------------------------------------------------------------------------ report and recommendation
def fake_arm(probes, finetune=None, pretrained=True, heads=('linear', )):
    """An arm's results as the study collects them: pretraining runs, probes, fine-tuning mIoU per head and seed."""
    finetune = finetune or [10.0]
    return dict(pretrain=[dict(loss=0.5, loss_baseline=1.0)] if pretrained else [],
                probe=[dict(probe_mIoU=v, probe_mAcc=v + 1, knn_acc=v + 2, majority_mIoU=3.0, majority_mAcc=4.0,
                            majority_aAcc=5.0) for v in probes],
                finetune={h: [dict(mIoU=v, aAcc=v + 40, mAcc=v + 5) for v in finetune] for h in heads})


def test_probe_warnings_flag_pretraining_that_does_not_beat_random_init():
    """Issue 27, item 4: the study names a pretrained arm whose frozen probe is within 1 mIoU point of random init
    (as on the digits: 4.41 vs 4.57); the reference numbers are worked out by hand."""
    results = {'scratch': fake_arm([4.5, 4.64], pretrained=False),  # random init: mean 4.57
               'pixels-blockwise': fake_arm([4.41]),                 # -0.16: flagged
               'tokens-blockwise': fake_arm([5.5]),                  # +0.93 < 1: flagged
               'vqkd-blockwise': fake_arm([5.6, 5.6])}               # +1.03: learned
    lines = R.probe_warnings(results)
    assert [line.split(':')[0] for line in lines] == ['- WARNING pixels-blockwise', '- WARNING tokens-blockwise']
    assert 'probe mIoU 4.41 vs 4.57 at random init (gain -0.16 < 1)' in lines[0]
    assert R.probe_warnings({k: v for k, v in results.items() if k != 'scratch'}) == []


def test_recommendation_follows_the_probe_then_fine_tuning():
    """A start whose probe does not beat random init by 1 point is never recommended; of those that do, one whose
    fine-tuning beats scratch by more than the spread under every decoder; else scratch, with the numbers."""
    heads = ('linear', 'upernet')
    scratch = fake_arm([5.2, 5.26], [30.0, 31.0], pretrained=False, heads=heads)  # probe 5.23; mIoU 30.5 ± 0.71
    failing = fake_arm([6.16], [40.0, 41.0], heads=heads)  # fine-tunes higher, but its probe learned nothing
    assert R.recommendation({'scratch': scratch, 'vqkd-blockwise': failing}, heads) == (
        'recommendation: start from scratch: vqkd-blockwise probe 6.16 vs 5.23 at random init, gain +0.93 < 1.0')
    good = fake_arm([8.23], [33.0, 34.0], heads=heads)  # +3.00 probe; +3.00 mIoU, spread 1.41
    assert R.recommendation({'scratch': scratch, 'vqkd-blockwise': failing, 'pixels-blockwise': good}, heads) == (
        'recommendation: start from pixels-blockwise: pixels-blockwise probe 8.23 vs 5.23 at random init, gain +3.00 '
        '>= 1.0, fine-tuning linear +3.00 vs scratch (spread 1.41), upernet +3.00 vs scratch (spread 1.41)')
    close = fake_arm([8.23], [31.0, 32.0], heads=heads)  # +1.00 mIoU, within the spread 1.41
    assert R.recommendation({'scratch': scratch, 'pixels-blockwise': close}, heads) == (
        'recommendation: start from scratch: pixels-blockwise probe 8.23 vs 5.23 at random init, gain +3.00 >= 1.0, '
        'fine-tuning linear +1.00 vs scratch (spread 1.41), upernet +1.00 vs scratch (spread 1.41): not above '
        'scratch by more than the spread')
    assert R.recommendation({'vqkd-blockwise': failing}, heads) is None  # no random-init probe to compare with
    assert R.recommendation({'scratch': scratch}, heads) is None


def report_args(**changes) -> argparse.Namespace:
    args = dict(labeled_root='/data/l', unlabeled_root='/data/u', num_labeled=None, num_classes=7, ft_iters=2,
                seeds=[0, 1], mim_iters=2, pretrain_seeds=1, dvae_iters=2, ft_options=[], ft_keep_init=[],
                pretrain_dir='/w', work_dir='/w', jobs=1, heads=['linear', 'upernet'])
    args.update(changes)
    return argparse.Namespace(**args)


def test_mim_report_text():
    """The report: the probe table with its majority row and warning, one table per decoder with each arm's difference
    to scratch against the spread, and the recommendation last."""
    heads = ('linear', 'upernet')
    results = {'scratch': fake_arm([5.2, 5.26], [30.0, 31.0], pretrained=False, heads=heads),
               'pixels-blockwise': fake_arm([6.16], [28.0, 29.0], heads=heads)}
    base = dict(mIoU=9.0, aAcc=60.0, mAcc=14.29)
    text = R.mim_report(report_args(), results, None, None, base, 90.0)
    lines = text.rstrip('\n').split('\n')
    assert text.count('| trivial baseline (majority class) |') == 3  # the probe's and each decoder's
    assert '| trivial baseline (majority class) | - | 3.00 | 4.00 | 5.00 |' in lines
    assert '| pixels-blockwise | L2 0.50 ± 0.00 (predict-the-mean 1.00 ± 0.00) | 6.16 ± 0.00 | 7.16 ± 0.00 | ' \
        '8.16 ± 0.00 |' in lines
    warning = next(i for i, line in enumerate(lines) if line.startswith('- WARNING pixels-blockwise'))
    assert warning < lines.index('Fine-tuning with the linear decoder '
                                 '(beit-tiny-p8_beit-pre_linear_1xb8-1.2k_shapes-64x64.py):')
    assert '| scratch | 30.50 ± 0.71 | 30.00, 31.00 | 70.50 ± 0.71 | 35.50 ± 0.71 |' in lines
    assert ('- upernet: pixels-blockwise - scratch = -2.00 mIoU; the sum of the two standard deviations is 1.41: the '
            'difference is more than the spread.') in lines
    assert lines[-1] == ('recommendation: start from scratch: pixels-blockwise probe 6.16 vs 5.23 at random init, '
                         'gain +0.93 < 1.0')
    assert 'dVAE' not in text and 'Tokenizer' not in text  # no arm here trains one
    assert 'Wall time 1.5 min with --jobs 1' in text


def chain_report() -> dict:
    """A report.json of the chain's study (one seed; arms tokens-blockwise and vqkd-blockwise; two decoders)."""
    heads = ('linear', 'upernet')
    results = {'scratch': fake_arm([5.2], [30.0], pretrained=False, heads=heads),
               'tokens-blockwise': fake_arm([5.5], [31.0], heads=heads),
               'vqkd-blockwise': fake_arm([6.16], [25.0], heads=heads)}
    for arm in ('tokens-blockwise', 'vqkd-blockwise'):
        results[arm]['pretrain'] = [dict(loss=3.25, mim_acc=0.125, mim_acc_baseline=0.0625)]
    return dict(args=dict(dvae_iters=2, vqkd_iters=2, mim_iters=2, ft_iters=2, vqkd_teacher='pixels-blockwise',
                          heads=list(heads)),
                tokenizer=dict(usage=0.5, perplexity=80.0, psnr=20.0, psnr_mean_colour=15.0),
                vqkd=dict(usage=0.25, perplexity=40.0, teacher_cosine=0.75), baseline=dict(mIoU=9.0), results=results)


CHAIN_LINES = [
    '[chain] dvae: iters=2 usage=0.5000 perplexity=80.0 psnr=20.00 (held-out; mean-colour psnr 15.00)',
    '[chain] vqkd: iters=2 usage=0.2500 perplexity=40.0 teacher_cosine=0.750 (held-out; teacher = pixels-blockwise)',
    '[chain] mim tokens-blockwise: iters=2 loss=3.2500 mim_acc=0.1250 (most frequent token 0.0625)',
    '[chain] mim vqkd-blockwise: iters=2 loss=3.2500 mim_acc=0.1250 (most frequent token 0.0625)',
    '[chain] seg (linear decoder) tokens-blockwise: iters=2 mIoU=31.00 from MIM vs 30.00 from scratch, +1.00 '
    '(majority class 9.00)',
    '[chain] seg (linear decoder) vqkd-blockwise: iters=2 mIoU=25.00 from MIM vs 30.00 from scratch, -5.00 '
    '(majority class 9.00)',
    '[chain] seg (upernet decoder) tokens-blockwise: iters=2 mIoU=31.00 from MIM vs 30.00 from scratch, +1.00 '
    '(majority class 9.00)',
    '[chain] seg (upernet decoder) vqkd-blockwise: iters=2 mIoU=25.00 from MIM vs 30.00 from scratch, -5.00 '
    '(majority class 9.00)',
    '[chain] recommendation: start from scratch: tokens-blockwise probe 5.50 vs 5.20 at random init, gain +0.30 < '
    '1.0; vqkd-blockwise probe 6.16 vs 5.20 at random init, gain +0.96 < 1.0']


def test_chain_lines():
    assert R.chain_lines(chain_report()) == CHAIN_LINES


def test_run_chain_prints_the_recommendation(tmp_path):
    """tools/run_chain.sh itself on a prepared study result (a stand-in interpreter for the data tool and the study):
    the script's own reading of the report is what prints."""
    work = tmp_path / 'work'
    (tmp_path / 'report.json').write_text(json.dumps(chain_report()))
    fake = tmp_path / 'python'
    fake.write_text(f'''#!/usr/bin/env bash
case "$1" in
    tools/make_demo_data.py) exit 0 ;;
    tools/analysis/mim_study.py) echo "$@" > "{tmp_path}/study_args"; cp "{tmp_path}/report.json" "{work}/"; exit 0 ;;
esac
exec "{sys.executable}" "$@"
''')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, CHAIN_PYTHON=str(fake), CHAIN_WORK_DIR=str(work), CHAIN_DATA_DIR=str(tmp_path / 'data'))
    proc = subprocess.run(['bash', 'tools/run_chain.sh'], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [line for line in proc.stdout.splitlines() if not line.startswith('[chain] done')] == CHAIN_LINES
    study = (tmp_path / 'study_args').read_text()
    assert '--arms scratch tokens-blockwise vqkd-blockwise --heads linear upernet' in study and str(work) in study


# ---------------------------------------------------------------------------------------------- the whole study
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


def test_data_errors_stop_the_study_before_any_run(tmp_path, monkeypatch):
    """Labeled images that are not .jpg (the default suffix) or ``--num-labeled`` above the training images: the
    study stops at once with what was looked for, where, and what was found; nothing trains."""
    monkeypatch.setattr(runs, 'start_training', lambda *a, **k: pytest.fail('a run started'))
    labeled, unlabeled = make_data(tmp_path)
    with pytest.raises(D.LabeledDataError, match=rf'^--num-labeled 9 is more than the 8 images of {labeled}/'):
        mim.run_study(study_args(tmp_path, labeled, unlabeled, num_labeled=9))
    rename_files(labeled, '.png')
    with pytest.raises(D.LabeledDataError) as error:
        mim.run_study(study_args(tmp_path, labeled, unlabeled))
    assert str(error.value).startswith(f'0 images matched *.jpg in {labeled}/images/training; found 8 *.png. '
                                       'Fix: pass the suffix'), error.value
    os.makedirs(tmp_path / 'empty' / 'images' / 'training')
    with pytest.raises(D.LabeledDataError, match=r'0 images matched .* in \S+/empty/images/training \(the unlabeled '
                       r'pool\).* Fix: --unlabeled-root needs its images under images/training'):
        mim.run_study(study_args(tmp_path, labeled, str(tmp_path / 'empty'), img_suffix='.png'))


def test_study_end_to_end_then_reused(tmp_path, monkeypatch):
    """tools/analysis/mim_study.py as a user runs it, with scratch and the pixel arm: the report, the probe curve and
    the written configs; the same study again in-process reuses every finished run."""
    labeled, unlabeled = make_data(tmp_path)
    rename_files(labeled)
    rename_files(unlabeled, '.png')
    work = tmp_path / 'study'
    cmd = [sys.executable, 'tools/analysis/mim_study.py', '--labeled-root', labeled, '--unlabeled-root', unlabeled,
           '--num-classes', '7', '--seeds', '0', '--arms', 'scratch', 'pixels-blockwise', '--mim-iters', '2',
           '--ft-iters', '2', '--workers', '0', '--work-dir', str(work)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=TOOL_ENV)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    report = json.loads((work / 'report.json').read_text())
    assert list(report['results']) == ['scratch', 'pixels-blockwise']
    for arm in ('scratch', 'pixels-blockwise'):
        assert 0 <= report['results'][arm]['finetune']['linear'][0]['mIoU'] <= 100
        assert 0 <= report['results'][arm]['probe'][0]['probe_mIoU'] <= 100
        assert 0 <= report['results'][arm]['probe'][0]['knn_acc'] <= 100
    assert 'loss_baseline' in report['results']['pixels-blockwise']['pretrain'][0]
    text = (work / 'report.md').read_text()
    assert text.count('| trivial baseline (majority class) |') == 2  # the probe's and the linear decoder's
    assert '- linear: pixels-blockwise - scratch = ' in text
    assert report['recommendation'].startswith('recommendation: start from ')
    assert text.rstrip('\n').split('\n')[-3:] == [report['recommendation'], '',
                                                 f'Probe curves over pretraining: {work / "probe_curves.png"}']
    assert proc.stdout.rstrip('\n').endswith(text.rstrip('\n'))  # printed as written
    curve = json.loads((work / 'mim' / 'pixels-blockwise_seed0' / 'dense_probe.json').read_text())
    assert curve['init'] is not None and [c['iter'] for c in curve['history']] == [1, 2]
    assert (work / 'probe_curves.png').is_file()
    assert {'finetune_linear.py', 'mim_pixels-blockwise.py'} <= set(os.listdir(work / 'configs'))
    assert not (work / 'dvae').exists()  # the pixel arm needs no tokenizer
    monkeypatch.setattr(runs, 'start_training', lambda *a, **k: pytest.fail('a finished run trained again'))
    args = study_args(tmp_path, labeled, unlabeled, arms=['scratch', 'pixels-blockwise'], work_dir=str(work))
    mim.run_study(args)
    assert json.loads((work / 'report.json').read_text())['results'] == report['results']
