"""What ``tools/train.py --resume CKPT`` spends opening its checkpoint, before and after the checks share one read.

    python tools/analysis/benchmark_resume.py --arch large --work-dir work_dirs/benchmark_resume

Writes one training checkpoint the size of a BEiT-L run's (the backbone's weights, AdamW's ``exp_avg`` and
``exp_avg_sq`` for each, ``meta`` and a message hub), then times, each in a fresh process (peak RSS from
``resource.getrusage``), the opening that ``--resume`` does:

- ``before`` (f67fafc): ``check_resumable`` (a full read), ``check_start_checkpoint``'s ``load_state_dict_file`` (a
  second) and MMEngine's load in ``Runner.resume`` through ``beit_mm.fileio`` (a third);
- ``after``: ``check_resumable``, the weights check on what it read, then the runner's load taking that object
  (:func:`beit_mm.engine.resume.opened.give_to_runner`; here a ``Runner`` with an empty model and no hooks, so
  that only the load's read is timed, as in ``before``).

Model building, data and training steps are the same in both and are left out. Prints seconds, peak RSS and the
ratio; the checkpoint is written once into ``--work-dir`` (checked as every output is) and reused.
"""
from __future__ import annotations

import argparse
import json
import os
import os.path as osp
import subprocess
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
ARCHS = {'base': (768, 12), 'large': (1024, 24)}

_MEASURE = r'''
import json, resource, sys, time
from types import SimpleNamespace
import torch
from mmengine.runner import Runner
from mmengine.runner.checkpoint import _load_checkpoint
import beit_mm
from beit_mm.engine.resume import check_resumable
from beit_mm.engine.resume.opened import OpenedCheckpoint, give_to_runner, identity_or_none
from beit_mm.fileio import load_state_dict_file, unwrap_state_dict
path, mode = sys.argv[1], sys.argv[2]
start = time.perf_counter()
identity = identity_or_none(path)
opened = check_resumable(path, with_ema=False)
if mode == 'before':
    del opened
    weights = load_state_dict_file(path)        # check_start_checkpoint's read
    del weights
    loaded = _load_checkpoint(path, map_location='cpu')  # Runner.resume -> MMEngine's CheckpointLoader -> the room
else:
    weights = unwrap_state_dict(opened)         # the weights check on what was read
    del weights
    runner = Runner.__new__(Runner)             # only its load (no model to fill, no hooks): the read is timed
    runner.model, runner.call_hook = torch.nn.Module(), lambda *args, **kwargs: None
    runner.logger = SimpleNamespace(info=lambda message: None)
    give_to_runner(runner, OpenedCheckpoint(path, identity, opened))
    del opened
    loaded = runner.load_checkpoint(path, map_location='cpu')  # Runner.resume's load: takes what was read
seconds = time.perf_counter() - start
print(json.dumps(dict(seconds=seconds, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      tensors=len(loaded['state_dict']))))
'''


def write_checkpoint(path: str, arch: str) -> float:
    """A training checkpoint of a BEiT ``arch`` backbone with AdamW state; returns its size in GB."""
    import torch

    import beit_mm  # noqa: F401
    from beit_mm.fileio.outputs import atomic_file
    from beit_mm.registry import MODELS
    dims, layers = ARCHS[arch]
    model = MODELS.build(dict(type='BEiT', arch=dict(embed_dims=dims, num_layers=layers, num_heads=16, mlp_ratio=4.0),
                              img_size=640, patch_size=16))
    params = list(model.parameters())
    state = {i: dict(step=torch.tensor(2.0), exp_avg=torch.randn_like(p), exp_avg_sq=torch.rand_like(p))
             for i, p in enumerate(params)}
    checkpoint = dict(
        meta=dict(iter=2, epoch=0, seed=0),
        state_dict=model.state_dict(),
        optimizer=dict(state=state, param_groups=[dict(lr=1e-4, weight_decay=0.05, params=list(range(len(params))))]),
        message_hub=dict(log_scalars={}, runtime_info=dict(iter=2), resumed_keys={}))
    with atomic_file(path) as tmp:
        torch.save(checkpoint, tmp)
    return osp.getsize(path) / 1e9


def measure(path: str, mode: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, '-c', _MEASURE, path, mode], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--arch', choices=sorted(ARCHS), default='large')
    parser.add_argument('--work-dir', default='work_dirs/benchmark_resume')
    parser.add_argument('--repeats', type=int, default=2, help='runs of each mode (alternating); the best is shown')
    args = parser.parse_args(argv)
    from beit_mm.fileio.names import refusal
    from beit_mm.fileio.outputs import OutputError, check_output
    try:  # a folder the script only adds its checkpoint to: no link, nothing inside a dataset
        check_output(args.work_dir, overwrite=True, kind='dir')
    except OutputError as error:
        raise refusal('benchmark_resume.py', error) from None
    os.makedirs(args.work_dir, exist_ok=True)
    path = osp.join(args.work_dir, f'beit-{args.arch}_adamw.pth')
    if not osp.isfile(path):
        print(f'writing {path} ...', flush=True)
        print(f'{path}: {write_checkpoint(path, args.arch):.2f} GB')
    results = {'before': [], 'after': []}
    for _ in range(args.repeats):
        for mode in results:
            results[mode].append(measure(path, mode))
    best = {mode: min(runs, key=lambda r: r['seconds']) for mode, runs in results.items()}
    for mode, r in best.items():
        print(f'{mode:6s}: {r["seconds"]:6.1f} s  peak RSS {r["peak_rss_mb"]:7.0f} MB  ({r["tensors"]} tensors)')
    print(f'after / before: time {best["after"]["seconds"] / best["before"]["seconds"]:.2f}x, peak RSS '
          f'{best["after"]["peak_rss_mb"] / best["before"]["peak_rss_mb"]:.2f}x')


if __name__ == '__main__':
    main()
