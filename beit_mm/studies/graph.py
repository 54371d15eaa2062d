"""The study's job graph: named tasks with dependencies, run up to ``jobs`` at a time, the critical path first."""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

# Task kinds (a task's name up to its first '/') in the order ready tasks start: the tokenizers and pretraining gate
# everything after them.
PRIORITY = ('tokenizer', 'teacher', 'pretrain', 'vqkd', 'vqkd_supervised', 'finetune', 'probe')


def run_graph(tasks: dict[str, tuple[list[str], Callable[[dict], dict]]], jobs: int) -> dict[str, dict]:
    """Run ``{name: (dependencies, fn(done) -> result)}`` with up to ``jobs`` at a time, each once all its
    dependencies are done (``done`` maps finished names to results); the first failure stops the study. Every
    task's kind is one of :data:`PRIORITY`; each finished task prints one line (``[mim_study] done <task>: ...``)."""
    done: dict[str, dict] = {}
    running: dict[Future, str] = {}
    waiting = dict(tasks)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while waiting or running:
            ready = [n for n, (deps, _) in waiting.items() if all(d in done for d in deps)]
            for task in sorted(ready, key=lambda n: PRIORITY.index(n.split('/')[0])):  # the critical path first
                if len(running) >= jobs:
                    break
                running[pool.submit(waiting.pop(task)[1], dict(done))] = task
            if not running:
                raise RuntimeError(f'unresolvable dependencies: {sorted(waiting)}')
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                task = running.pop(future)
                done[task] = future.result()
                print(f'[mim_study] done {task}: {_short(done[task])}', flush=True)
    return done


def _short(metrics: dict) -> str:
    return ' '.join(f'{k} {v:.4g}' for k, v in metrics.items() if isinstance(v, float))
