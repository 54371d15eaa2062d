"""Each config family's demo on 2 processes (gloo on CPU): 2 training iterations ending in a validation, then a test
of the checkpoint, printing the metric.

The EoMT COCO panoptic demo goes through ``tools/dist_train.sh``/``dist_test.sh``; every other family runs in one
torchrun launch of ``tests/support/dist_families.py`` (``train`` and ``run_test`` with ``launcher='pytorch'``), with
two chains: BEiT MIM -> ImageNet fine-tuning, VQ-KD -> BEiT v2 pretraining. MIM and tokenizer families train only.
Every launch and family has a time limit, so a rank left waiting in a collective fails with its family and output
instead of hanging; rank 0's checkpoint, log, pictures, probe curve and tokenizer numbers are checked."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import os.path as osp
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import torch

from ..conftest import ROOT, free_port

SHELL_TIMEOUT = 240  # seconds per shell launch (imports ~20-40 s per process on 2 busy cores, then one demo)
FAMILY_TIMEOUT = 120  # seconds per family in the worker's launch (train + test: 4-17 s on 2 busy cores)
WORKER_TIMEOUT = 600  # seconds for that whole launch (imports once, then every family)
NUM_TRAIN, NUM_VAL, SIZE = 8, 3, 64
IMAGENET_CLASSES, IMAGENET_TRAIN, IMAGENET_VAL = 5, 2, 1  # per class: 10 training, 5 validation images
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
DEMO = osp.join(ROOT, 'configs', 'demo')
STUDIES = osp.join(ROOT, 'configs', 'studies')


def _loaders(root: str, loaders: tuple[str, ...] = LOADERS) -> dict:
    """``loaders`` reading ``root`` in this process: no worker processes, so the data list is not serialized for them
    either (MMEngine's serialization runs a ``gc.collect()`` per dataset, ~1 s in a process holding the imports)."""
    return {f'{loader}.{key}': value for loader in loaders for key, value in (
        ('dataset.data_root', root), ('dataset.serialize_data', False), ('num_workers', 0),
        ('persistent_workers', False))}


def _short(root: str, loaders: tuple[str, ...] = LOADERS) -> dict:
    """2 iterations of 2 images per process, then a validation and a checkpoint; every iteration logged."""
    options = {**_loaders(root, loaders), 'train_dataloader.batch_size': 2, 'train_cfg.max_iters': 2,
               'default_hooks.checkpoint.interval': 2, 'default_hooks.logger.interval': 1}
    return {**options, 'train_cfg.val_interval': 2} if 'val_dataloader' in loaders else options


def _seg(data: dict, work: str) -> dict:
    return _short(data['ade'])


def _coco(data: dict, work: str) -> dict:
    """The COCO demos, panoptic and instance: only the datasets' roots point at the data."""
    return _short(data['coco'])


def _annealed(options: Callable[[dict, str], dict]) -> Callable[[dict, str], dict]:
    """``options`` of an EoMT demo with its masks annealed within the 2 iterations (the annealing hook at work)."""
    def eomt(data: dict, work: str) -> dict:
        return {**options(data, work), 'model.mask_annealing.start_steps': [1, 2],
                'model.mask_annealing.end_steps': [2, 3]}
    return eomt


def _pmt_panoptic(data: dict, work: str) -> dict:
    """The PMT demo with its six decoder blocks' masks annealed within the 2 iterations."""
    return {**_coco(data, work), 'model.mask_annealing.start_steps': [0, 1, 1, 1, 1, 1],
            'model.mask_annealing.end_steps': [1, 2, 2, 2, 2, 3]}


def _custom(data: dict, work: str) -> dict:
    return _short(data['custom'])


def _imagenet(data: dict, work: str) -> dict:
    """One epoch of 5 images per process in batches of 3 (2 iterations), a validation and a checkpoint after it."""
    return {**_loaders(data['imagenet']), 'train_dataloader.batch_size': 3, 'train_cfg.max_epochs': 1,
            'train_cfg.val_interval': 1, 'default_hooks.checkpoint.interval': 1, 'default_hooks.logger.interval': 1}


def _beit_mim(data: dict, work: str) -> dict:
    return {**_short(data['ade'], ('train_dataloader', )), 'model.target_generator.init_cfg.checkpoint': data['dalle']}


def _recipe_pipeline(base: str, name: str) -> list:
    """The train pipeline ``name`` of a full-size recipe's dataset base at the demo's size."""
    from mmengine.config import Config
    pipeline = Config.fromfile(osp.join(ROOT, 'configs', '_base_', 'datasets', base)).to_dict()[name]
    pipeline[0].update(scale=SIZE)
    return pipeline


def _in1k_finetuning(data: dict, work: str) -> dict:
    """From the BEiT MIM family's checkpoint, with the BEiT fine-tuning recipe's train pipeline (draws on the worker,
    ops in ``AugmentClsDataPreprocessor``)."""
    return {**_imagenet(data, work), 'model.backbone.init_cfg.checkpoint': osp.join(work, 'beit-mim', 'train',
                                                                                    'iter_2.pth'),
            'model.data_preprocessor.type': 'beit_mm.AugmentClsDataPreprocessor',
            'train_dataloader.dataset.pipeline': _recipe_pipeline('imagenet_bs128_beit_ft.py', 'train_pipeline')}


def _cvt(data: dict, work: str) -> dict:
    """With the CvT-13 recipe's GPU-decode train pipeline (the worker reads the bytes and draws; the preprocessor
    decodes, crops, resizes, flips and augments)."""
    return {**_imagenet(data, work), 'data_preprocessor.type': 'beit_mm.AugmentClsDataPreprocessor',
            'train_dataloader.collate_fn': dict(type='pseudo_collate'),
            'train_dataloader.dataset.pipeline': _recipe_pipeline('imagenet_bs256_cvt_224.py',
                                                                  'train_pipeline_gpu_decode')}


def _vqkd(data: dict, work: str) -> dict:
    """The study's VQ-KD from a random BEiT teacher; its held-out hook (``custom_hooks.0``) on the validation images."""
    return {**_short(data['ade'], ('train_dataloader', )),
            'model.teacher.backbone.init_cfg.checkpoint': data['teacher'],
            'custom_hooks.0.folder': osp.join(data['ade'], 'images', 'validation'), 'custom_hooks.0.interval': 2,
            'custom_hooks.0.num_images': NUM_VAL}


def _beit2_mim(data: dict, work: str) -> dict:
    """The BEiT v2 recipe's demo (cls-token pretraining, shared lm head) with the VQ-KD family's tokenizer; the dense
    probe on the labeled demo set (ADE20K ids up to 22) added, as a run watching its features would."""
    probe = dict(type='beit_mm.DenseProbeHook', data_root=data['ade'], num_classes=22, img_size=SIZE, interval=2,
                 num_train=NUM_TRAIN, num_val=NUM_VAL)
    return {**_short(data['ade'], ('train_dataloader', )),
            'model.target_generator.init_cfg.checkpoint': osp.join(work, 'vqkd', 'train', 'iter_2.pth'),
            'custom_hooks': [probe]}


def _dvae(data: dict, work: str) -> dict:
    """The MIM demo's dVAE; its held-out hook (``custom_hooks.1``) on the validation images after the 2 iterations."""
    return {**_short(data['ade'], ('train_dataloader', )), 'custom_hooks.1.interval': 2,
            'custom_hooks.1.num_images': NUM_VAL, 'custom_hooks.1.grid_images': 8}


@dataclasses.dataclass(frozen=True)
class Family:
    """A family's demo config and options, its test metric (None: trains only) or training hook line, its rank-0 hook
    files, whether its test draws images, and the types its dumped config must name."""
    config: str
    options: Callable[[dict, str], dict]
    metric: str | None
    outputs: tuple[str, ...] = ('iter_2.pth', )
    train_line: str | None = None
    show: bool = False
    trained_with: tuple[str, ...] = ()


FAMILIES = {  # in launch order: a chain's second family after its first
    'upernet': Family(osp.join(DEMO, 'beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py'), _seg, 'mIoU', show=True),
    'eomt-semantic': Family(osp.join(DEMO, 'eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'), _annealed(_seg),
                            'mIoU'),
    'eomt-instance': Family(osp.join(DEMO, 'eomt_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py'),
                            _annealed(_coco), 'coco/segm_mAP'),
    'eomt-dinov3': Family(osp.join(DEMO, 'eomt_dinov3-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'), _annealed(_seg),
                          'mIoU'),
    'mask2former-semantic': Family(osp.join(DEMO, 'mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'), _seg,
                                   'mIoU'),
    'mask2former-panoptic': Family(osp.join(DEMO, 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py'),
                                   _coco, 'coco_panoptic/PQ', show=True),
    'pmt-panoptic': Family(osp.join(DEMO, 'pmt_dinov3-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py'), _pmt_panoptic,
                           'coco_panoptic/PQ'),
    'mask2former-instance': Family(osp.join(DEMO, 'mask2former_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py'),
                                   _coco, 'coco/segm_mAP'),
    'vit-adapter': Family(osp.join(DEMO, 'beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py'), _seg, 'mIoU'),
    'custom-dataset': Family(osp.join(DEMO, 'beit-tiny-p8_upernet_1xb8-1k_custom-demo-64x64.py'), _custom, 'mIoU'),
    'mask2former-adapter-panoptic': Family(
        osp.join(DEMO, 'mask2former_beit-adapter-tiny_1xb8-0.3k_coco-panoptic-demo-64x64.py'), _coco,
        'coco_panoptic/PQ'),
    'cvt-upernet': Family(osp.join(DEMO, 'cvt-13-tiny_upernet_1xb8-0.3k_ade20k-demo-128x128.py'), _seg, 'mIoU'),
    'dvae': Family(osp.join(DEMO, 'dvae-tiny_1xb16-0.2k_ade20k-demo-48px.py'), _dvae, None,
                   outputs=('iter_2.pth', 'tokenizer_eval/iter_2.json', 'tokenizer_eval/iter_2.png'),
                   train_line=r'tokenizer held-out .* iter 2: (usage [\d.]+ .*psnr [\d.]+ dB)'),
    'beit-mim': Family(osp.join(DEMO, 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'), _beit_mim, None,
                       train_line=r'Iter\(train\) \[2/2\].*(mim_acc: [\d.]+)'),
    'cvt-mim': Family(osp.join(DEMO, 'beit_cvt-13-tiny_1xb16-coslr-0.3k_ade20k-demo-96px.py'), _beit_mim, None,
                      train_line=r'Iter\(train\) \[2/2\].*(mim_acc: [\d.]+)'),
    'in1k-finetuning': Family(osp.join(DEMO, 'beit-tiny-p16_beit-pre_1xb32-10e_in1k-demo-64px.py'),
                              _in1k_finetuning, 'accuracy/top1', outputs=('epoch_1.pth', ),
                              trained_with=('AugmentClsDataPreprocessor', 'DecodeRandomResizedCrop',
                                            'SampleRandAugment', 'SampleRandomErasing')),
    'cvt': Family(osp.join(DEMO, 'cvt-13-tiny_1xb32-30e_in1k-demo-64px.py'), _cvt, 'accuracy/top1',
                  outputs=('epoch_1.pth', ),
                  trained_with=('AugmentClsDataPreprocessor', 'EncodedRandomResizedCrop', 'SampleRandAugment',
                                'pseudo_collate')),
    'vqkd': Family(osp.join(STUDIES, 'vqkd-tiny-p8-dec1x_beit-tiny-p8_1xb32-coslr-1.5k_shapes-64px.py'), _vqkd, None,
                   outputs=('iter_2.pth', 'tokenizer_eval/iter_2.json'),
                   train_line=r'VQ-KD held-out .* iter 2: (usage [\d.]+ .*teacher cosine [-\d.]+)'),
    'beit2-mim': Family(osp.join(DEMO, 'beitv2_beit-tiny-p8_1xb16-coslr-0.3k_ade20k-demo-64px.py'), _beit2_mim, None,
                        outputs=('iter_2.pth', 'dense_probe.json'),
                        train_line=r'Iter\(train\) \[2/2\].*(loss_cls_pt: [\d.]+)'),
}
SHELL_FAMILY = 'eomt-panoptic'  # tools/dist_train.sh + tools/dist_test.sh
SHELL_CONFIG = osp.join(DEMO, 'eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py')


def _launch(cmd: list[str], cwd: str, log: str, limit: Callable[[float], str | None]) -> float:
    """Run ``cmd`` in its own process group, output into ``log``; it must exit 0. When ``limit(seconds so far)`` names
    what ran past its time the group is stopped and the test fails with that name. Returns the wall seconds."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1',
               PYTHON=sys.executable)
    start = time.perf_counter()
    with open(log, 'w') as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while proc.poll() is None:
            time.sleep(1)
            late = limit(time.perf_counter() - start)
            if late is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                pytest.fail(f'{" ".join(cmd)}: {late} (a process waiting in a collective the other never enters?); '
                            f'its last output:\n{_tail(log)}')
    assert proc.returncode == 0, f'{" ".join(cmd)} exited {proc.returncode}:\n{_tail(log, 8000)}'
    return time.perf_counter() - start


def _tail(path: str, size: int = 4000) -> str:
    with open(path, errors='replace') as f:
        return f.read()[-size:]


def _past(timeout: float) -> Callable[[float], str | None]:
    return lambda seconds: f'ran past {timeout} s' if seconds > timeout else None


def _results(path: str) -> dict:
    """The worker's results so far (none before its first family starts)."""
    if not osp.exists(path):
        return dict(running=None, since=None, done={})
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def data(tmp_path_factory) -> dict:
    """Each demo layout once (ADE20K, COCO, custom, ImageNet; 64 px), a DALL-E tokenizer and a VQ-KD teacher of random
    weights in their real key layouts."""
    from mmengine.config import Config

    from beit_mm.data.demo.ade20k import make_demo_ade20k
    from beit_mm.data.demo.coco import make_demo_coco
    from beit_mm.data.demo.custom import make_demo_custom
    from beit_mm.data.demo.imagenet import make_demo_imagenet
    from beit_mm.models.backbones import BEiT
    from beit_mm.models.tokenizers import DALLEEncoder
    base = tmp_path_factory.mktemp('data')
    paths = dict(ade=make_demo_ade20k(str(base / 'ade'), NUM_TRAIN, NUM_VAL, SIZE, seed=0),
                 coco=make_demo_coco(str(base / 'coco'), NUM_TRAIN, NUM_VAL, SIZE, seed=0),
                 custom=make_demo_custom(str(base / 'custom'), NUM_TRAIN, NUM_VAL, SIZE, seed=0),
                 imagenet=make_demo_imagenet(str(base / 'imagenet'), IMAGENET_CLASSES, IMAGENET_TRAIN, IMAGENET_VAL,
                                             SIZE, seed=0),
                 dalle=str(base / 'dalle.pth'), teacher=str(base / 'teacher.pth'))
    torch.manual_seed(0)
    torch.save(DALLEEncoder(**Config.fromfile(FAMILIES['beit-mim'].config).tokenizer).state_dict(), paths['dalle'])
    teacher = Config.fromfile(FAMILIES['vqkd'].config).model.teacher.backbone
    backbone = BEiT(**{k: v for k, v in teacher.items() if k not in ('type', 'init_cfg')}, with_mask_token=True)
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in backbone.state_dict().items()}}, paths['teacher'])
    return paths


@pytest.fixture(scope='module')
def worker_run(data, tmp_path_factory) -> dict:
    """Every family of :data:`FAMILIES` in one 2-process launch: ``{'results': the worker's results, 'log': its
    output, 'work': the work dir}``. A launch that fails or runs out of time leaves the families it finished."""
    work = str(tmp_path_factory.mktemp('families'))
    families = [dict(name=name, config=family.config, cfg_options=family.options(data, work),
                     train_dir=osp.join(work, name, 'train'),
                     test_dir=osp.join(work, name, 'test') if family.metric else None,
                     show_dir=osp.join(work, name, 'show') if family.show else None)
                for name, family in FAMILIES.items()]
    spec, results, log = (osp.join(work, name) for name in ('spec.json', 'results.json', 'launch.log'))
    with open(spec, 'w') as f:
        json.dump(dict(results=results, families=families), f, indent=1)

    def late(seconds: float) -> str | None:
        state = _results(results)
        if state['running'] is not None and time.time() - state['since'] > FAMILY_TIMEOUT:
            return f'family {state["running"]!r} ran past {FAMILY_TIMEOUT} s'
        if seconds > WORKER_TIMEOUT:
            where = f'family {state["running"]!r}' if state['running'] else 'the imports or between families'
            return f'the launch ran past {WORKER_TIMEOUT} s, in {where}'
        return None

    outcome = dict(work=work, log=log, error=None)
    try:
        seconds = _launch([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_port',
                           str(free_port()), '-m', 'tests.support.dist_families', spec], work, log, late)
        print(f'\n{len(FAMILIES)} families in one 2-process launch: {seconds:.0f} s')
    except (AssertionError, pytest.fail.Exception) as error:  # each family's test reports it
        outcome['error'] = str(error)
    outcome['results'] = _results(results)
    return outcome


@pytest.fixture(scope='module')
def shell_run(data, tmp_path_factory) -> dict:
    """:data:`SHELL_FAMILY` through ``tools/dist_train.sh CONFIG 2`` then ``tools/dist_test.sh CONFIG CKPT 2``."""
    work = str(tmp_path_factory.mktemp(SHELL_FAMILY))
    options = [f'{k}={v}' for k, v in _annealed(_coco)(data, work).items()]
    options = [o.replace(' ', '') for o in options]  # lists as [1,2]: one shell word each
    train_log, test_log = osp.join(work, 'train.log'), osp.join(work, 'test.log')
    seconds = _launch(['bash', osp.join(ROOT, 'tools', 'dist_train.sh'), SHELL_CONFIG, '2', '--work-dir', work,
                       '--cfg-options', *options], work, train_log, _past(SHELL_TIMEOUT))
    seconds += _launch(['bash', osp.join(ROOT, 'tools', 'dist_test.sh'), SHELL_CONFIG, osp.join(work, 'iter_2.pth'),
                        '2', '--work-dir', osp.join(work, 'test'), '--cfg-options', *options], work, test_log,
                       _past(SHELL_TIMEOUT))
    print(f'\n{SHELL_FAMILY} through the shell launchers: {seconds:.0f} s')
    return dict(train=_tail(train_log, 10**7), test=_tail(test_log, 10**7))


def _log(folder: str) -> str:
    """The log MMEngine's rank 0 wrote in ``folder`` (``<timestamp>/<timestamp>.log``)."""
    logs = sorted(glob.glob(osp.join(folder, '*', '*.log')))
    assert logs, f'no log in {folder}'
    with open(logs[-1], errors='replace') as f:
        return f.read()


def _value(pattern: str, text: str, what: str) -> str:
    found = re.findall(pattern, text)
    assert found, f'{what}: no match of {pattern!r} in:\n{text[-3000:]}'
    return found[-1]


TRAINED = r'Iter\(train\) \[2/2\]|Epoch\(train\) +\[1\]\[2/2\]'


def test_shell_launchers_train_validate_and_test(shell_run):
    """tools/dist_train.sh CONFIG 2: 2 iterations and a validation with PQ; tools/dist_test.sh on its checkpoint: the
    same PQ."""
    metric = 'coco_panoptic/PQ'
    assert re.search(r'Iter\(train\) \[2/2\]', shell_run['train']), shell_run['train'][-3000:]
    values = {}
    for mode, output in (('val', shell_run['train']), ('test', shell_run['test'])):
        values[mode] = _value(rf'Iter\({mode}\).*?{re.escape(metric)}: ([\d.]+)', output, f'{SHELL_FAMILY} {mode}')
        print(f'{SHELL_FAMILY} {mode} {metric}: {values[mode]}')
    assert float(values['val']) == pytest.approx(float(values['test']), abs=1e-4), values


@pytest.mark.parametrize('name', list(FAMILIES))
def test_family_trains_validates_and_tests_on_two_processes(name, worker_run):
    """The family trained 2 iterations on 2 processes, validated, wrote its checkpoint and hook files from rank 0, and
    was tested with the validation's metric (or logged its training hook's number); rank 0 drew its test images where
    asked."""
    family, results = FAMILIES[name], worker_run['results']
    if name not in results['done']:
        stopped = results['running'] or 'the imports'
        why = 'failed or hung here' if stopped == name else f'not reached: the launch stopped at {stopped}'
        pytest.fail(f'{name}: {why}\n{worker_run["error"] or _tail(worker_run["log"])}')
    done = results['done'][name]
    train_dir = osp.join(worker_run['work'], name, 'train')
    log = _log(train_dir)
    assert re.search(TRAINED, log), log[-3000:]
    for output in family.outputs:
        assert osp.isfile(osp.join(train_dir, output)), f'{name}: no {output} in {train_dir}'
    if family.trained_with:
        dumped = ''.join(open(path).read() for path in glob.glob(osp.join(train_dir, '*.py')))
        assert all(f"'{kind}'" in dumped or f"'beit_mm.{kind}'" in dumped for kind in family.trained_with), \
            f'{name}: the dumped config in {train_dir} lacks one of {family.trained_with}'
    if family.metric is None:
        line = _value(family.train_line, log, name)
        print(f'{name} (trains only) {line} ({done["seconds"]:.1f} s)')
        return
    val = _value(rf'(?:Iter|Epoch)\(val\).*?{re.escape(family.metric)}: ([\d.]+)', log, f'{name} val')
    test = done['metrics'][family.metric]
    assert test is not None and 0.0 <= test <= 100.0, done['metrics']
    # the validated model is the checkpoint's: both processes validated with the same BatchNorm statistics
    assert float(val) == pytest.approx(test, abs=1e-4), f'{name}: validation {family.metric} {val}, checkpoint {test}'
    test_log = _log(osp.join(worker_run['work'], name, 'test'))
    assert re.search(rf'(?:Iter|Epoch)\(test\).*?{re.escape(family.metric)}: ', test_log), test_log[-3000:]
    if family.show:  # MMEngine's visualizer draws on rank 0 only: its share of the test images, and a warning says so
        drawn = os.listdir(osp.join(worker_run['work'], name, 'show', 'vis_data', 'vis_image'))
        assert len(drawn) == (NUM_VAL + 1) // 2, drawn
        assert 'pictures are of its share of the test images (about 1 in 2)' in test_log, test_log[-3000:]
    print(f'{name} val {family.metric}: {val}, test: {test} ({done["seconds"]:.1f} s)')
