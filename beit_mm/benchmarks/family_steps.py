"""One training step and one validation of one config of every model family, each in its own process with a time
limit, on synthetic data in the config's own dataset layout (random weights, no checkpoint read).

A family's row: its config, ok or FAILED with the error's last line, the first and second train step's seconds
(each timed around ``train_step``, data loading excluded), the validation's seconds (the config's val loop over
one image, metric included) and the peak CUDA memory. The steps run eager (the config's ``compile`` off) under
``AmpOptimWrapper(dtype='bfloat16')`` where ``amp`` is set, else in fp32.

Each family runs in a forked child so that a crash, an out-of-memory error or a hang (``timeout``) fails that row
alone; the parent imports the libraries once and leaves CUDA to the children.
"""
from __future__ import annotations

import multiprocessing
import os
import os.path as osp
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass

#: Train steps run per family; the first pays the kernels' first-call cost, the second is the steady step.
TRAIN_STEPS = 2
#: Images in each train step and in the validation.
BATCH = 2
VAL_IMAGES = 1
#: The fewest seconds left in the budget for a family to start.
MIN_SECONDS = 10


@dataclass(frozen=True)
class Family:
    """A model family: a full-size config, the tiny config the dry run takes, and the layout of each one's data.

    ``data``/``demo_data``: ``'ade20k'``, ``'coco'`` or ``'imagenet'``; ``size``: the image side written for the
    full-size run (at least its crop size), the dry run's images are ``DEMO_SIZE``."""
    name: str
    config: str
    data: str
    size: int
    demo: str
    demo_data: str


DEMO_SIZE = 64
FAMILIES: tuple[Family, ...] = (
    Family('UPerNet', 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py', 'ade20k', 640,
           'configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py', 'ade20k'),
    Family('EoMT semantic', 'configs/eomt/eomt_beit-large_4xb4-amp-39k_ade20k-640x640.py', 'ade20k', 640,
           'configs/demo/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py', 'ade20k'),
    Family('EoMT panoptic', 'configs/eomt/eomt_beit-large_4xb4-amp-12e_coco-panoptic-640x640.py', 'coco', 640,
           'configs/demo/eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py', 'coco'),
    Family('EoMT instance', 'configs/eomt/eomt_beit-large_4xb4-amp-12e_coco-instance-640x640.py', 'coco', 640,
           'configs/demo/eomt_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py', 'coco'),
    Family('Mask2Former semantic', 'configs/mask2former/mask2former_beit-base_8xb2-160k_ade20k-640x640.py', 'ade20k',
           640, 'configs/demo/mask2former_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py', 'ade20k'),
    Family('Mask2Former panoptic', 'configs/vit_adapter/mask2former_beitv2-adapter-large_16xb1-265k_coco-panoptic.py',
           'coco', 1024, 'configs/demo/mask2former_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py', 'coco'),
    # no full-size Mask2Former instance config ships: its demo config runs at the demo size on both sides
    Family('Mask2Former instance', 'configs/demo/mask2former_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py',
           'coco', DEMO_SIZE, 'configs/demo/mask2former_beit-tiny-p8_1xb8-0.3k_coco-instance-demo-64x64.py', 'coco'),
    Family('ViT-Adapter UPerNet', 'configs/vit_adapter/beit-adapter-base_upernet_8xb2-160k_ade20k-640x640.py',
           'ade20k', 640, 'configs/demo/beit-adapter-tiny_upernet_1xb8-1k_ade20k-demo-64x64.py', 'ade20k'),
    Family('ViT-Adapter Mask2Former', 'configs/vit_adapter/mask2former_beit-adapter-base_8xb2-160k_ade20k-640x640.py',
           'ade20k', 640, 'configs/demo/mask2former_beit-adapter-tiny_1xb8-1k_ade20k-demo-64x64.py', 'ade20k'),
    Family('MIM v1', 'configs/beit/beit_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 'imagenet', 256,
           'configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py', 'ade20k'),
    Family('MIM v2', 'configs/beit2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py', 'imagenet', 256,
           'configs/demo/beitv2_beit-tiny-p8_1xb16-coslr-0.3k_ade20k-demo-64px.py', 'ade20k'),
    Family('ImageNet fine-tuning', 'configs/beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py', 'imagenet', 256,
           'configs/demo/beit-tiny-p16_beit-pre_1xb32-10e_in1k-demo-64px.py', 'imagenet'),
    Family('CvT', 'configs/cvt/cvt-13_8xb256-300e_in1k.py', 'imagenet', 256,
           'configs/demo/cvt-13-tiny_1xb32-30e_in1k-demo-64px.py', 'imagenet'),
    Family('DINOv3 EoMT', 'configs/eomt/eomt_dinov3-large-p16_4xb4-amp-16e_ade20k-512x512.py', 'ade20k', 512,
           'configs/demo/eomt_dinov3-tiny-p8_1xb8-1k_ade20k-demo-64x64.py', 'ade20k'),
)


@dataclass
class StepResult:
    """One family's row. ``error``: the last line of the exception (``''`` when ok); seconds and GiB None when not
    measured (no validation in the config, a failure before it, no CUDA)."""
    family: str
    config: str
    error: str = ''
    first_step_s: float | None = None
    step_s: float | None = None
    val_s: float | None = None
    peak_gib: float | None = None
    traceback: str = ''

    @property
    def ok(self) -> bool:
        return not self.error


def select(names: Iterable[str] | None) -> list[Family]:
    """The families named (all for None), in ``FAMILIES`` order.

    Raises:
        ValueError: a name that is no family's, with the list of names.
    """
    if not names:
        return list(FAMILIES)
    names = list(names)
    known = {f.name for f in FAMILIES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f'unknown families {unknown}; choose from {sorted(known)}')
    return [f for f in FAMILIES if f.name in names]


def make_data(kind: str, root: str, size: int) -> str:
    """Write (or reuse) a synthetic set in ``kind``'s layout with ``size``-pixel images under ``root``; its data root.

    Raises:
        ValueError: an unknown ``kind``.
    """
    images = BATCH * TRAIN_STEPS
    if kind == 'ade20k':
        from beit_mm.data.demo.ade20k import make_demo_ade20k
        return make_demo_ade20k(root, num_train=images, num_val=VAL_IMAGES, size=size)
    if kind == 'coco':
        from beit_mm.data.demo.coco import make_demo_coco
        return make_demo_coco(root, num_train=images, num_val=VAL_IMAGES, size=size)
    if kind == 'imagenet':
        from beit_mm.data.demo.imagenet import make_demo_imagenet
        return make_demo_imagenet(root, num_classes=images, per_class_train=1, per_class_val=1, size=size,
                                  ann_files=True)
    raise ValueError(f"unknown data layout {kind!r}: use 'ade20k', 'coco' or 'imagenet'")


def _datasets(loader: dict) -> Iterable[dict]:
    """The dataset dicts of a dataloader config, wrapped ones (``dataset=``/``datasets=``) included."""
    stack = [loader.get('dataset')]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend([node.get('dataset')] + list(node.get('datasets') or []))


def _rebase(path, old_root: str, new_root: str):
    if isinstance(path, str) and old_root and path.startswith(old_root):
        return osp.join(new_root, path[len(old_root):].lstrip('/'))
    return path


def prepare_config(cfg, data_root: str, work_dir: str, amp: bool) -> None:
    """Edit a loaded config in place for one family step.

    Args:
        cfg: the loaded config.
        data_root: the synthetic set every dataset reads, and evaluator files under a dataset's old root.
        work_dir: the run's work dir (MMEngine's log).
        amp: bf16 autocast (``beit_mm.AmpOptimWrapper``); fp32 otherwise.

    The run then trains ``TRAIN_STEPS`` steps of ``BATCH`` images and validates over ``VAL_IMAGES`` (where the config
    validates), eager, with single-process loaders, reading and writing no checkpoint; a VQ-KD tokenizer gets random
    unit codes, as a frozen one refuses an empty codebook.
    """
    from mmengine.optim import AmpOptimWrapper
    from mmengine.registry import MODELS, OPTIM_WRAPPERS

    from beit_mm.models.builder import drop_pretrained_init
    from beit_mm.models.tokenizers.vqkd import VQKD
    from beit_mm.registry import config_type_is
    scope = cfg.get('default_scope')
    drop_pretrained_init(cfg.model)
    tokenizer = cfg.model.get('target_generator')
    if isinstance(tokenizer, dict) and config_type_is(tokenizer.get('type'), VQKD, MODELS, scope):
        tokenizer['kmeans_init'] = False
    cfg.load_from, cfg.resume, cfg.compile, cfg.work_dir = None, False, False, work_dir
    cfg.launcher = 'none'
    old_roots = set()
    has_val = cfg.get('val_dataloader') is not None and cfg.get('val_cfg') is not None
    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        loader = cfg.get(key)
        if loader is None:
            continue
        loader.update(batch_size=min(loader.get('batch_size', BATCH), BATCH), num_workers=0,
                      persistent_workers=False)
        for dataset in _datasets(loader):
            if 'data_root' in dataset:
                old_roots.add(dataset['data_root'])
                dataset['data_root'] = data_root
        top = loader['dataset']
        top['indices'] = BATCH * TRAIN_STEPS if key == 'train_dataloader' else VAL_IMAGES
    for key in ('val_evaluator', 'test_evaluator'):
        evaluators = cfg.get(key)
        for evaluator in evaluators if isinstance(evaluators, list) else [evaluators]:
            if isinstance(evaluator, dict) and isinstance(evaluator.get('ann_file'), str):
                for old in old_roots:
                    evaluator['ann_file'] = _rebase(evaluator['ann_file'], old, data_root)
    loop = {k: v for k, v in cfg.train_cfg.items() if k == 'type'}
    if cfg.train_cfg.get('by_epoch') or 'max_epochs' in cfg.train_cfg:  # one epoch of the TRAIN_STEPS batches
        cfg.train_cfg = dict(loop, by_epoch=True, max_epochs=1, val_interval=1)
    else:
        cfg.train_cfg = dict(loop, max_iters=TRAIN_STEPS, val_interval=TRAIN_STEPS)
    if not has_val:
        cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    hooks = cfg.get('default_hooks') or {}
    hooks['checkpoint'] = dict(type='CheckpointHook', interval=-1, save_last=False)
    hooks['logger'] = dict(type='LoggerHook', interval=1)
    cfg.default_hooks = hooks
    wrapper = cfg.optim_wrapper
    is_amp = config_type_is(wrapper.get('type', 'OptimWrapper'), AmpOptimWrapper, OPTIM_WRAPPERS, scope)
    if amp:
        wrapper.update(type='beit_mm.AmpOptimWrapper', dtype='bfloat16')
        wrapper.pop('loss_scale', None)
    elif is_amp:
        wrapper.update(type='OptimWrapper')
        for key in ('dtype', 'loss_scale', 'use_fsdp'):
            wrapper.pop(key, None)


def _clock_hook(sync: Callable[[], None], times: dict):
    """A hook recording each train step's and the validation's seconds into ``times``."""
    from mmengine.hooks import Hook

    class StepClock(Hook):
        priority = 'VERY_LOW'

        def before_train_iter(self, runner, batch_idx, data_batch=None):
            sync()
            times['start'] = time.perf_counter()

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            sync()
            times.setdefault('train', []).append(time.perf_counter() - times['start'])

        def before_val(self, runner):
            sync()
            times['val_start'] = time.perf_counter()

        def after_val(self, runner):
            sync()
            times['val'] = time.perf_counter() - times['val_start']

    return StepClock()


def _last_line(error: BaseException) -> str:
    lines = [ln for ln in traceback.format_exception_only(type(error), error)[-1].strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(error).__name__


def run_family(family: Family, config: str, data_root: str, work_dir: str, amp: bool) -> StepResult:
    """Train ``TRAIN_STEPS`` steps of a config and validate once, in this process.

    Args:
        family: the family the row names.
        config: the config file.
        data_root, work_dir, amp: as :func:`prepare_config` takes them.

    Returns:
        The row; an exception becomes its ``error`` (last line) and ``traceback``.
    """
    import torch
    from mmengine.config import Config

    from beit_mm.engine.run_options import use_fused_adamw
    from beit_mm.engine.runner import build_runner
    result = StepResult(family.name, config)
    cuda = torch.cuda.is_available()
    times: dict = {}
    try:
        cfg = Config.fromfile(config)
        prepare_config(cfg, data_root, work_dir, amp)
        use_fused_adamw(cfg)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        runner = build_runner(cfg)
        runner.register_hook(_clock_hook(torch.cuda.synchronize if cuda else (lambda: None), times))
        runner.train()
    except Exception as error:  # noqa: BLE001 - the row reports any failure and the next family runs
        result.error, result.traceback = _last_line(error), traceback.format_exc()
    steps = times.get('train', [])
    if len(steps) < TRAIN_STEPS and not result.error:
        result.error = f'ran {len(steps)} of {TRAIN_STEPS} train steps'
    result.first_step_s = steps[0] if steps else None
    result.step_s = steps[1] if len(steps) > 1 else None
    result.val_s = times.get('val')
    if cuda:
        result.peak_gib = torch.cuda.max_memory_allocated() / 2**30
    return result


def _child(conn, family: Family, config: str, data_root: str, work_dir: str, amp: bool) -> None:
    """Run one family with its output silenced (MMEngine's log stays in ``work_dir``); send its row."""
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    conn.send(run_family(family, config, data_root, work_dir, amp))
    conn.close()


def _take(conn, wait: float) -> StepResult | None:
    """The row ``conn`` receives within ``wait`` seconds, or None (nothing, or the child ended without one)."""
    if not conn.poll(wait):
        return None
    try:
        return conn.recv()
    except EOFError:
        return None


def run_isolated(family: Family, config: str, data_root: str, work_dir: str, amp: bool, timeout: float) -> StepResult:
    """:func:`run_family` in a forked child (spawned where this process holds CUDA, which a fork cannot carry): a
    crash or more than ``timeout`` seconds fails this row alone."""
    import torch
    context = multiprocessing.get_context('spawn' if torch.cuda.is_initialized() else 'fork')
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, family, config, data_root, work_dir, amp), daemon=True)
    start = time.perf_counter()
    child.start()
    send.close()
    result = _take(receive, timeout)
    child.join(max(1.0, timeout - (time.perf_counter() - start)))
    result = result or _take(receive, 0)  # a row sent after the wait ended
    timed_out = child.is_alive()
    if timed_out:  # hung, or stuck in its exit after sending its row
        child.kill()
        child.join()
    if result is None:
        why = f'timed out after {timeout:.0f} s' if timed_out else f'the process ended with exit code {child.exitcode}'
        result = StepResult(family.name, config, error=why)
    return result


def _seconds(value: float | None) -> str:
    return '-' if value is None else f'{value:.2f}'


def line(result: StepResult) -> str:
    """One printed line: family, config, ok/FAILED (+ the error's last line), step, val and memory."""
    status = 'ok' if result.ok else f'FAILED: {result.error}'
    memory = '-' if result.peak_gib is None else f'{result.peak_gib:.1f} GiB'
    return (f'{result.family}: {osp.basename(result.config)}: {status}; first step {_seconds(result.first_step_s)} s, '
            f'step {_seconds(result.step_s)} s, val {_seconds(result.val_s)} s, peak {memory}')


def markdown(results: list[StepResult], device_name: str, amp: bool) -> str:
    """The Markdown table of ``results``, headed by the device and the precision."""
    precision = 'bf16 autocast' if amp else 'fp32'
    rows = [f'# One train step and one validation per family on {device_name}', '',
            f'{TRAIN_STEPS} train steps of batch {BATCH} and one validation over {VAL_IMAGES} image per config, '
            f'eager, {precision}, random weights, synthetic data in the config\'s layout.', '',
            '| family | config | result | first step s | step s | val s | peak GiB |', '|---|---|---|---|---|---|---|']
    for r in results:
        status = 'ok' if r.ok else f'FAILED: {r.error}'.replace('|', '\\|')
        memory = '-' if r.peak_gib is None else f'{r.peak_gib:.1f}'
        rows.append(f'| {r.family} | {osp.basename(r.config)} | {status} | {_seconds(r.first_step_s)} | '
                    f'{_seconds(r.step_s)} | {_seconds(r.val_s)} | {memory} |')
    return '\n'.join(rows) + '\n'


def run_families(families: list[Family], root: str, work_dir: str, dry_run: bool, amp: bool, timeout: float,
                 budget: float | None = None, report: Callable[[str], None] = print,
                 log: Callable[[str], None] = lambda text: None) -> list[StepResult]:
    """Each family's step in its own child, its line passed to ``report`` as it ends.

    Args:
        families: the families, in order.
        root: the checkout whose configs run.
        work_dir: where the synthetic data (``data/<layout>-<size>``) and each run's work dir go.
        dry_run: run the demo configs on ``DEMO_SIZE`` images instead of the full-size ones.
        amp: bf16 autocast; fp32 otherwise.
        timeout: seconds each family may take.
        budget: seconds all families may take together (None: no limit); a family starting with less than
            ``MIN_SECONDS`` left is not run and fails its row.
        report: called with each family's :func:`line`.
        log: called with a failed family's traceback (its run's MMEngine log stays in its work dir).
    """
    # torch.cuda.is_available() in this process (an import may ask) then checks through NVML, which leaves the
    # children free to initialize CUDA after the fork
    os.environ.setdefault('PYTORCH_NVML_BASED_CUDA_CHECK', '1')
    import mmdet.models  # noqa: F401 - imported once here, not in every child
    import mmpretrain.models  # noqa: F401
    import mmseg.models  # noqa: F401

    import beit_mm.models  # noqa: F401
    results = []
    deadline = None if budget is None else time.monotonic() + budget
    for family in families:
        config = family.demo if dry_run else family.config
        kind, size = (family.demo_data, DEMO_SIZE) if dry_run else (family.data, family.size)
        left = timeout if deadline is None else min(timeout, deadline - time.monotonic())
        if left < MIN_SECONDS:
            result = StepResult(family.name, config, error=f'not run: the budget of {budget:.0f} s was spent')
            results.append(result)
            report(line(result))
            continue
        try:
            data_root = make_data(kind, osp.join(work_dir, 'data', f'{kind}-{size}'), size)
        except Exception as error:  # noqa: BLE001 - a family whose data cannot be written fails alone
            result = StepResult(family.name, config, error=_last_line(error))
        else:
            run_dir = osp.join(work_dir, 'runs', family.name.replace(' ', '_'))
            result = run_isolated(family, osp.join(root, config), data_root, run_dir, amp, left)
        results.append(result)
        report(line(result))
        if result.traceback:
            log(result.traceback)
    return results
