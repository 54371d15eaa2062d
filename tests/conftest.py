import collections
import functools
import importlib.util
import itertools
import os
import re
import sys
from types import ModuleType

import pytest
import torch

import beit_mm  # noqa: F401  (the registries and the file room; the checkout is on sys.path by pytest.ini's ``pythonpath``)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Under pytest-xdist each worker (and the subprocesses its tests start) computes with its share of the cores.
XDIST_WORKERS = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
CORES = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)
TORCH_THREADS = max(1, min(2, CORES // XDIST_WORKERS))
torch.set_num_threads(TORCH_THREADS)
if XDIST_WORKERS > 1:
    os.environ.setdefault('OMP_NUM_THREADS', str(TORCH_THREADS))


@pytest.fixture(scope='session')
def ade_demo_root(tmp_path_factory) -> str:
    """The session's read-only ADE20K-layout demo root (4 training, 2 validation images of 96 px, seed 0); a test that
    changes data makes its own."""
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    root = tmp_path_factory.mktemp('ade_demo') / 'ADEChallengeData2016'
    return make_demo_ade20k(str(root), num_train=4, num_val=2, size=96, seed=0)


def imagenet_from_ade(ade_root: str, root: str) -> str:
    """An ImageNet-layout folder at ``root`` made of ``ade_root``'s training images: ``train/n0000000{label}/img_{i}
    .JPEG`` with labels alternating 0, 1, the first two images also as ``val/val_{i}.JPEG``, and ``meta/{train,val}
    .txt``. Returns ``root``."""
    from pathlib import Path

    from PIL import Image
    imnet = Path(root)
    (imnet / 'meta').mkdir(parents=True)
    (imnet / 'val').mkdir()
    train_lines, val_lines = [], []
    for i, src in enumerate(sorted((Path(ade_root) / 'images' / 'training').glob('*.jpg'))):
        label = i % 2
        rel = f'n0000000{label}/img_{i}.JPEG'
        (imnet / 'train' / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.open(src).save(imnet / 'train' / rel, format='JPEG')
        train_lines.append(f'{rel} {label}')
        if i < 2:
            Image.open(src).save(imnet / 'val' / f'val_{i}.JPEG', format='JPEG')
            val_lines.append(f'val_{i}.JPEG {label}')
    (imnet / 'meta' / 'train.txt').write_text('\n'.join(train_lines) + '\n')
    (imnet / 'meta' / 'val.txt').write_text('\n'.join(val_lines) + '\n')
    return str(imnet)


def run_tool(argv: list[str], cwd: str = ROOT, env: dict | None = None):
    """``python <argv>`` (a script of the checkout: ``argv[0]`` relative to it or absolute) run in this process as
    ``load_tool(argv[0]).main()`` with ``sys.argv = argv``, in ``cwd``, with ``env``'s variables set for the run
    (``PYTHONPATH`` aside). Returns a ``subprocess.CompletedProcess`` as the command would (``returncode``, text
    ``stdout``/``stderr``). In this process to save a launch's imports; cwd, environment, torch threads and
    deterministic mode are put back."""
    import contextlib
    import gc
    import io
    import subprocess
    import traceback
    import warnings
    script = os.path.relpath(argv[0], ROOT) if os.path.isabs(argv[0]) else argv[0]
    tool = load_tool(script)
    out, err = io.StringIO(), io.StringIO()
    here, saved_env, saved_argv = os.getcwd(), dict(os.environ), sys.argv
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    code = 0
    os.chdir(cwd)
    os.environ.update({k: v for k, v in (env or {}).items() if k != 'PYTHONPATH'})
    sys.argv = [str(a) for a in argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter('default')  # each warning once per run, as a new process prints it
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: err.write(
                warnings.formatwarning(message, category, filename, lineno, line))
            try:
                status = tool.main()
                code = status if isinstance(status, int) else 0  # a script that ends in sys.exit(main())
            except SystemExit as stop:
                if isinstance(stop.code, int) or stop.code is None:
                    code = stop.code or 0
                else:
                    code = 1
                    print(stop.code, file=sys.stderr)
            except Exception:  # noqa: B902 -- as the interpreter: the traceback on stderr, exit status 1
                traceback.print_exc()
                code = 1
    finally:
        sys.argv = saved_argv
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved_env)
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
        gc.collect()  # the run's model and optimizer (reference cycles) before the next test
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())


def run_train(cfg, path) -> str:
    """``cfg`` dumped to ``path`` and trained by ``tools/train.py <path>`` in this process (:func:`run_tool`); the
    run must exit 0. Returns its log (stdout + stderr)."""
    cfg.dump(str(path))
    proc = run_tool(['tools/train.py', str(path)])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it), for a process group's ``MASTER_PORT``:
    a fixed port collides between pytest-xdist workers and with other test runs on the machine."""
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


_TOOLS: dict[str, ModuleType] = {}


def load_tool(path: str) -> ModuleType:
    """The script ``path`` (relative to the checkout, e.g. ``'tools/convert_checkpoint.py'``) as a module, so a test
    calls its ``main(argv)`` or helpers in this process; loaded once, registered in ``sys.modules`` as
    ``beit_mm_<path's stem, / as _>``."""
    if path not in _TOOLS:
        name = 'beit_mm_' + os.path.splitext(os.path.normpath(path))[0].replace(os.sep, '_')
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        _TOOLS[path] = module
    return _TOOLS[path]


@pytest.fixture
def rng() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def randomize_(module: torch.nn.Module, seed: int = 0, std: float = 0.2) -> torch.nn.Module:
    """Fill every parameter and float buffer with random values (weights from zero-initialized tables too), so a
    parity test exercises every tensor."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, t in list(module.named_parameters()) + list(module.named_buffers()):
            if not t.is_floating_point():
                continue
            if name.endswith('running_var'):
                t.copy_(torch.rand(t.shape, generator=g) + 0.5)
            elif name.endswith(('weight', 'lambda_1', 'lambda_2', 'gamma_1', 'gamma_2')) and t.dim() == 1:
                t.copy_(1 + std * torch.randn(t.shape, generator=g))
            else:
                t.copy_(std * torch.randn(t.shape, generator=g))
    return module


# Two float32 kernels summing in another order differ by a few ulps of the largest value (1.5e-7 of the magnitude at
# most between the attention kernels); 1e-5 leaves ~60x headroom, while a real error is of the order of the values.
FP32_KERNEL_RTOL = 1e-5


def assert_close_to_scale(got: torch.Tensor, ref: torch.Tensor, rtol: float = FP32_KERNEL_RTOL, what: str = ''):
    """``max |got - ref| <= rtol * max(|ref|.max(), 1)``: float32 agreement relative to the tensor's magnitude (an
    absolute bound for values below 1), independent of which CPU kernels computed it."""
    scale = max(float(ref.abs().max()), 1.0)
    diff = float((got - ref).abs().max())
    assert diff <= rtol * scale, f'{what}: max |diff| {diff:.3e} > {rtol:g} x {scale:.3e}'


NARROW_BEIT = dict(embed_dims=64, num_heads=4)
WIDTH_KEYS = ('embed_dims', 'embed_dim', 'in_channels', 'channels')


def narrow_beit(cfg) -> int:
    """Narrow ``cfg.model``'s BEiT to 64 channels in 4 heads, keeping its depth, mlp ratio, feature levels and every
    other setting, so that a full-size config trains through ``tools/train.py`` in seconds on any CPU (BEiT-L's
    300M parameters and their AdamW states take minutes per step and GBs per checkpoint there, and bf16 is emulated
    on AVX2-only CPUs). Every model field that holds the full width follows. Returns the full width."""
    from beit_mm.models.backbones.beit import ARCHS
    arch = cfg.model.backbone.arch
    full = dict(ARCHS[arch]) if isinstance(arch, str) else dict(arch)
    width, narrow = full['embed_dims'], NARROW_BEIT['embed_dims']

    def follow(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == 'target_generator':
                    continue
                if key in WIDTH_KEYS and value == width:
                    node[key] = narrow
                elif key in WIDTH_KEYS and isinstance(value, (list, tuple)) and value and set(value) == {width}:
                    node[key] = [narrow] * len(value)
                else:
                    follow(value)
        elif isinstance(node, (list, tuple)):
            for item in node:
                follow(item)

    follow(cfg.model)
    cfg.model.backbone.arch = {**full, **NARROW_BEIT}
    return width


def run_full_size_model(config: str, size: int = 64) -> tuple[int, object]:
    """Build ``config``'s model at its own widths and depth (constructors' random init, no file read, ``img_size`` =
    ``size``) and run one forward at ``size`` px: a segmentor's logits, a classifier's scores, or, for a MIM config,
    its backbone's masked tokens through its head's loss (no tokenizer). Returns the parameter count and the output."""
    from mmengine.config import Config
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import MODELS, init_default_scope

    from beit_mm.apis import drop_pretrained_init
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    model_cfg = cfg.model.to_dict()
    drop_pretrained_init(model_cfg)
    if 'img_size' in model_cfg['backbone']:
        model_cfg['backbone']['img_size'] = size
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        if 'target_generator' in model_cfg:  # MIM: masked tokens -> token loss
            backbone, head = MODELS.build(model_cfg['backbone']), MODELS.build(model_cfg['head'])
            grid = size // model_cfg['backbone'].get('patch_size', 16)
            mask = torch.zeros(1, grid, grid, dtype=torch.bool)
            mask.view(-1)[::2] = True
            target = torch.randint(head.lm_head.out_features, (1, grid * grid))
            out = head.loss(backbone.forward_masked(x, mask), target, mask.flatten(1))
            params = [backbone, head]
        else:
            model = revert_sync_batchnorm(MODELS.build(model_cfg)).eval()
            out, params = model(x, mode='tensor'), [model]
    return sum(p.numel() for m in params for p in m.parameters()), out


def shrink_seg_config(cfg, data_root: str, checkpoint: str, work_dir: str, crop: int = 64):
    """Override only the sizes of a full-size segmentation config so it trains 2 iterations on tiny data (2 images per
    batch for BN's pooled features), plus ``data_root`` and the backbone checkpoint path."""
    cfg.work_dir = work_dir
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dl = cfg[loader]
        dl.num_workers = 0
        dl.persistent_workers = False
        dl.dataset.data_root = data_root
        for t in dl.dataset.pipeline:
            if t.type in ('RandomResize', 'Resize'):
                t.scale = (4 * crop, crop)
            if t.type.split('.')[-1] in ('RandomCrop', 'HistogramRandomCrop'):
                t.crop_size = (crop, crop)
    cfg.train_dataloader.batch_size = 2
    cfg.model.data_preprocessor.size = (crop, crop)
    if 'img_size' in cfg.model.backbone:
        cfg.model.backbone.img_size = crop
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    if cfg.model.test_cfg.get('mode') == 'slide':
        cfg.model.test_cfg.crop_size = (crop, crop)
        cfg.model.test_cfg.stride = (crop * 2 // 3, ) * 2
    cfg.train_cfg.max_iters = 2
    cfg.train_cfg.val_interval = 2
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 2
    return cfg


def shrink_imagenet_loaders(cfg, data_root: str, size: int) -> None:
    """An ImageNet classification config's train/val/test loaders on a tiny ImageNet-layout folder at ``size`` px:
    batch 2, no workers, crops and resizes scaled as the config's 224/256 (``ResizeEdge`` at size * 8 / 7)."""
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        dl = cfg[name]
        dl.num_workers, dl.persistent_workers, dl.batch_size = 0, False, 2
        dl.dataset.data_root = data_root
        for t in dl.dataset.pipeline:
            if t.type in ('RandomResizedCrop', 'beit_mm.DecodeRandomResizedCrop'):
                t.scale = size
            elif t.type == 'ResizeEdge':
                t.scale = size * 8 // 7
            elif t.type == 'CenterCrop':
                t.crop_size = size


@pytest.fixture
def mm_warnings() -> list[str]:
    """The messages of warnings logged to MMEngine's current logger during the test."""
    import logging

    from mmengine.logging import MMLogger
    records: list[str] = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = lambda record: records.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


@pytest.fixture(autouse=True)
def _isolated_default_scope():
    """Each test starts without an MMEngine default scope (a test that calls ``init_default_scope('mmseg')`` would
    otherwise change how later tests resolve unscoped registry names)."""
    from mmengine.registry import DefaultScope
    DefaultScope._instance_dict.clear()
    yield
    DefaultScope._instance_dict.clear()


_RUNNER_NUMBERS = itertools.count()  # one count for the whole session: names never repeat in this process


@pytest.fixture(autouse=True)
def _own_runner_names(monkeypatch):
    """Each in-process MMEngine Runner gets its own experiment name (a config's fixed visualizer ``name`` dropped).

    MMEngine names a runner's visualizer ``<name>_<start second>`` and reuses an existing one of that name: two
    runners started within one second would share the first one's, writing into a deleted work dir."""
    from mmengine.runner import Runner
    init = Runner.__init__

    def own_name(self, *args, **kwargs):
        kwargs['experiment_name'] = f'{kwargs.get("experiment_name") or "test"}_{next(_RUNNER_NUMBERS)}'
        if isinstance(kwargs.get('visualizer'), dict):  # a fixed name (default_runtime's 'visualizer'), as build_runner
            kwargs['visualizer'] = {k: v for k, v in kwargs['visualizer'].items() if k != 'name'}
        init(self, *args, **kwargs)

    monkeypatch.setattr(Runner, '__init__', own_name)



_SHARED_FIXTURE = re.compile(r"""scope\s*=\s*['"](module|class|package)['"]""")


@functools.lru_cache(maxsize=None)
def shares_a_fixture(path: str) -> bool:
    """Whether the test file ``path`` (relative to the checkout) defines a module-, class- or package-scoped fixture."""
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return bool(_SHARED_FIXTURE.search(f.read()))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n N --dist loadscope`` (what tools/run_tests.sh runs) with the scope of a test file's fixtures as its
    unit of work: the tests of a file that defines a module- or class-scoped fixture (a reference training run, a
    converted checkpoint) go to one worker, so that fixture is built once, not once per worker; every other test is
    handed out on its own, to whichever worker is free; files with most tests first."""
    if config.getvalue('dist') != 'loadscope':
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FixtureScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split('::', 1)[0]
            return path if shares_a_fixture(path) else nodeid

    config.option.loadscopereorder = False  # the order of pytest_collection_modifyitems below
    return FixtureScopeScheduling(config, log)


# Files whose tests run for minutes: handed out first, so no worker starts one while the other has nothing left.
LONG_FIRST = ('tests/docs/test_readme_commands.py', 'tests/engine/test_fsdp.py', 'tests/studies/test_chain.py',
              'tests/engine/test_kill_resume.py', 'tests/studies/test_mim_study.py', 'tests/engine/test_scale.py',
              'tests/tools/test_dist_families.py')


def pytest_collection_modifyitems(config, items):
    """Under xdist: the files of :data:`LONG_FIRST` first, then the files that share a fixture (most tests first, as
    xdist's ``--loadscope-reorder``), then every other test in file order."""
    if int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1')) <= 1:
        return
    paths = [item.nodeid.split('::', 1)[0] for item in items]
    count = collections.Counter(paths)

    def rank(i: int) -> tuple:
        path = paths[i]
        if path in LONG_FIRST:
            return 0, LONG_FIRST.index(path), 0
        return (1, -count[path], path) if shares_a_fixture(path) else (2, 0, '')

    order = sorted(range(len(items)), key=rank)
    items[:] = [items[i] for i in order]
