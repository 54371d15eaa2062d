"""The compiled ops each model family calls, and the devices the installed build has kernels for.

:func:`audit` runs one training step and one test step of one demo config per family (:data:`FAMILIES`) on CPU,
on generated demo data, while :class:`OpRecorder` notes every compiled op that ran and on which device:

- mmcv's ``mmcv._ext`` functions (each wrapped for the run; a call counts when it returns);
- ``torch.ops.torchvision`` ops (a ``TorchDispatchMode``);
- ops a module sends tensors to by their device alone, whichever build is installed (:func:`device_routed`):
  recorded for ``cuda`` when such a module runs.

:func:`missing_kernels` lists (family, op, device) where a family calls an op on a device of :data:`DEVICES` that the
installed build has no kernel for (:func:`kernel_devices`): an op seen on CPU is taken to run on CUDA too, since the
call site passes the model's tensors.
"""
from __future__ import annotations

import logging
import os.path as osp
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .family_steps import FAMILIES as STEP_FAMILIES

#: The devices the installation guide says the configs run on.
DEVICES = ('cpu', 'cuda')

#: family -> its demo config (relative to the repository root): the families of the GPU steps, one config each.
FAMILIES = {family.name: family.demo for family in STEP_FAMILIES}


def device_routed() -> dict[type, tuple[str, ...]]:
    """module class -> the compiled ops its forward calls for every CUDA tensor, whatever the build holds: mmcv
    2.1.0's ``MultiScaleDeformableAttention`` (``mmcv/ops/multi_scale_deform_attn.py:366-372``; exact class, so a
    subclass that picks its kernel is not counted)."""
    from mmcv.ops import MultiScaleDeformableAttention
    return {MultiScaleDeformableAttention: ('ms_deform_attn_forward', 'ms_deform_attn_backward')}


class _TorchvisionOps(TorchDispatchMode):
    """Notes every ``torchvision::`` op dispatched, with its tensors' device types."""

    def __init__(self, calls: dict[str, set[str]]) -> None:
        super().__init__()
        self.calls = calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.namespace == 'torchvision':
            self.calls[f'torchvision::{func._opname}'] |= _devices((args, kwargs))
        return out


def _devices(values) -> set[str]:
    if isinstance(values, torch.Tensor):
        return {values.device.type}
    if isinstance(values, dict):
        values = list(values.values())
    if isinstance(values, (list, tuple)):
        return set().union(*(_devices(v) for v in values)) if values else set()
    return set()


class OpRecorder:
    """Records the compiled ops called inside ``with recorder:``; ``calls`` maps ``mmcv._ext::<fn>`` and
    ``torchvision::<op>`` to the device types they ran on, plus each :func:`device_routed` op as ``cuda``."""

    def __init__(self) -> None:
        self.calls: dict[str, set[str]] = defaultdict(set)
        self._undo: list = []

    def _wrap(self, ext, name: str):
        fn = getattr(ext, name)

        def recorded(*args, **kwargs):
            out = fn(*args, **kwargs)
            self.calls[f'mmcv._ext::{name}'] |= _devices((args, kwargs))
            return out

        return recorded

    def _routed_hook(self, module, args, output) -> None:
        for op in device_routed().get(type(module), ()):
            self.calls[f'mmcv._ext::{op}'].add('cuda')

    def __enter__(self) -> OpRecorder:
        import mmcv._ext as ext
        for name in dir(ext):
            if not name.startswith('_') and callable(getattr(ext, name)):
                self._undo.append((ext, name, getattr(ext, name)))
                setattr(ext, name, self._wrap(ext, name))
        self._hook = torch.nn.modules.module.register_module_forward_hook(self._routed_hook)
        self._mode = _TorchvisionOps(self.calls)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._hook.remove()
        for ext, name, fn in reversed(self._undo):
            setattr(ext, name, fn)
        self._undo.clear()


def make_audit_data(root: str) -> str:
    """Tiny demo sets under ``root/data/`` at the configs' default roots (ADE20K, COCO, ImageNet layouts).

    Returns:
        ``root``, to pass as :func:`run_family`'s ``data_dir``.
    """
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    from beit_mm.data.demo.coco import make_demo_coco
    from beit_mm.data.demo.imagenet import make_demo_imagenet
    make_demo_ade20k(osp.join(root, 'data', 'ade_demo'), num_train=2, num_val=1, size=96, seed=0)
    make_demo_coco(osp.join(root, 'data', 'coco_demo'), num_train=2, num_val=1, size=64, seed=0)
    make_demo_imagenet(osp.join(root, 'data', 'imagenet_demo'), num_classes=5, per_class_train=1, per_class_val=1,
                       size=64, seed=0)
    return root


def _rooted(node, data_dir: str):
    """``node`` with every relative ``data_root`` under ``data_dir``."""
    if isinstance(node, dict):
        return {k: (osp.join(data_dir, v) if k == 'data_root' and isinstance(v, str) and not osp.isabs(v)
                    else _rooted(v, data_dir)) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_rooted(v, data_dir) for v in node)
    return node


def _loader(cfg, key: str):
    from mmengine.runner import Runner
    loader = dict(cfg[key], batch_size=2, num_workers=0, persistent_workers=False)
    return Runner.build_dataloader(loader, seed=0)


@contextmanager
def _recording(recorder: OpRecorder | None) -> Iterator[None]:
    if recorder is None:
        yield
        return
    with recorder:
        yield


def run_family(config: str, data_dir: str, recorder: OpRecorder | None = None) -> None:
    """One training step (loss, backward, optimizer step) and one test step (where the config has a test loader) of
    ``config`` on CPU, its model built
    with random weights and no pretrained files, its loaders reading under ``data_dir`` (:func:`make_audit_data`).

    Args:
        config: a config file.
        data_dir: the folder its relative ``data_root`` values are read under.
        recorder: entered around the steps (not around building).
    """
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    cfg = Config.fromfile(config)
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)  # the init report of every parameter
    try:
        _steps(cfg, data_dir, recorder)
    finally:
        logger.setLevel(level)


def _steps(cfg, data_dir: str, recorder: OpRecorder | None) -> None:
    from mmengine.logging import MessageHub
    from mmengine.optim import build_optim_wrapper

    from beit_mm.models.builder import build_from_config
    loaders = [k for k in ('train_dataloader', 'test_dataloader') if cfg.get(k)]  # pretraining has no test loader
    cfg.merge_from_dict(_rooted({k: cfg[k].to_dict() for k in loaders}, data_dir))
    torch.manual_seed(0)
    model = build_from_config(cfg).train()
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    train_batch = next(iter(_loader(cfg, 'train_dataloader')))
    test_batch = next(iter(_loader(cfg, 'test_dataloader'))) if 'test_dataloader' in loaders else None
    hub = MessageHub.get_current_instance()
    hub.update_info('iter', 0)
    hub.update_info('max_iters', 1)
    if hasattr(model, 'set_annealing_step'):  # EoMT: its annealing hook's step, masks on
        model.set_annealing_step(0)
    _random_codebooks(model)
    with _recording(recorder):
        model.train_step(train_batch, optim_wrapper)
        if test_batch is not None:
            model.eval()
            with torch.no_grad():
                model.test_step(test_batch)


def _random_codebooks(model: torch.nn.Module) -> None:
    """Random unit codes in every untrained VQ codebook: a frozen tokenizer refuses an all-zero one."""
    from beit_mm.models.tokenizers.quantizer import Codebook
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, Codebook) and not m.ready():
            with torch.no_grad():
                m.weight.copy_(torch.nn.functional.normalize(torch.randn(m.weight.shape, generator=g), dim=-1))
                m.initted.fill_(1)
            m.refresh_host_state()


def audit(root: str, data_dir: str, families: dict[str, str] | None = None) -> dict[str, dict[str, set[str]]]:
    """The compiled ops of each family's steps (:func:`run_family` under an :class:`OpRecorder`).

    Args:
        root: the repository root the configs' paths are relative to.
        data_dir: as :func:`run_family`'s.
        families: family -> config; :data:`FAMILIES` by default.

    Returns:
        family -> {op -> device types}, an empty dict for a family that calls none.
    """
    out = {}
    for family, config in (families or FAMILIES).items():
        recorder = OpRecorder()
        run_family(osp.join(root, config), data_dir, recorder)
        out[family] = dict(recorder.calls)
    return out


def kernel_devices(op: str) -> set[str]:
    """The device types of :data:`DEVICES` the installed build has a kernel of ``op`` for.

    mmcv's ``_ext`` functions dispatch by device inside one library: CPU kernels where mmcv's ``csrc/pytorch/cpu``
    has one (probed here by the call having run on CPU, see :func:`missing_kernels`), CUDA ones only in a build with
    CUDA ops (``mmcv.ops.get_compiling_cuda_version()``). torchvision's are read from the dispatcher.
    """
    library, name = op.split('::')
    if library == 'torchvision':
        keys = {'cpu': 'CPU', 'cuda': 'CUDA'}
        return {d for d in DEVICES if torch._C._dispatch_has_kernel_for_dispatch_key(op, keys[d])}
    from mmcv.ops import get_compiling_cuda_version
    return {'cuda'} if get_compiling_cuda_version() != 'not available' else set()


def missing_kernels(found: dict[str, dict[str, set[str]]]) -> list[tuple[str, str, str]]:
    """(family, op, device) for each op a family calls on a device of :data:`DEVICES` with no kernel there.

    An op that ran on CPU has a CPU kernel and is taken to be called on CUDA as well; a device-routed op
    (recorded for ``cuda`` only) needs the CUDA kernel.
    """
    missing = []
    for family, calls in found.items():
        for op, devices in sorted(calls.items()):
            has = kernel_devices(op) | (devices & {'cpu'})
            needs = set(DEVICES) if 'cpu' in devices else devices
            missing += [(family, op, d) for d in DEVICES if d in needs and d not in has]
    return missing


def markdown_table(found: dict[str, dict[str, set[str]]]) -> str:
    """A Markdown table: family, compiled op, devices it runs on, devices the installed build has it for."""
    lines = ['| family | compiled op called | devices it is called on | kernels in this install |', '|---|---|---|---|']
    for family, calls in found.items():
        if not calls:
            lines.append(f'| {family} | none | | |')
        for op, devices in sorted(calls.items()):
            needs = set(DEVICES) if 'cpu' in devices else devices
            has = kernel_devices(op) | (devices & {'cpu'})
            lines.append(f'| {family} | `{op}` | {", ".join(sorted(needs))} | {", ".join(sorted(has)) or "none"} |')
    return '\n'.join(lines)
