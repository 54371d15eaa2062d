"""TEST SUPPORT ONLY: train and test a list of configs in turn in each process of one torchrun launch, for
tests/tools/test_dist_families.py.

    python -m torch.distributed.run --nproc_per_node 2 -m tests.support.dist_families SPEC.json

``SPEC.json``: ``{"results": PATH, "families": [{"name", "config", "cfg_options", "train_dir", "test_dir",
"show_dir"}, ...]}`` (``test_dir`` None trains only). Rank 0 rewrites ``results`` when each family starts
(``running``, ``since``) and ends (``done``), so a launch cut by a timeout names what it was running."""
import json
import sys
import time

from beit_mm.apis.testing import run_test
from beit_mm.apis.train import train
from beit_mm.engine.launch import is_rank_zero
from beit_mm.fileio.outputs import atomic_file


def _write(path: str, results: dict) -> None:
    with atomic_file(path, durable=False) as tmp, open(tmp, 'w') as f:
        json.dump(results, f, indent=1, default=float)


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    results = dict(running=None, since=None, done={})
    for family in spec['families']:
        name = family['name']
        if is_rank_zero():
            results['running'], results['since'] = name, time.time()
            _write(spec['results'], results)
            print(f'dist_families: {name} starts', flush=True)
        start = time.perf_counter()
        train(family['config'], work_dir=family['train_dir'], cfg_options=family['cfg_options'], launcher='pytorch')
        done = dict(train_seconds=time.perf_counter() - start, metrics=None)
        if family['test_dir'] is not None:
            result = run_test(family['config'], family['train_dir'], work_dir=family['test_dir'],
                              show_dir=family['show_dir'], cfg_options=family['cfg_options'], launcher='pytorch')
            done['metrics'] = result['metrics']
        done['seconds'] = time.perf_counter() - start
        if is_rank_zero():
            results['done'][name] = done
            results['running'] = results['since'] = None
            _write(spec['results'], results)
            print(f'dist_families: {name} done in {done["seconds"]:.1f} s: {done["metrics"]}', flush=True)


if __name__ == '__main__':
    main(sys.argv[1])
