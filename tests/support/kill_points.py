"""TEST SUPPORT ONLY: points at which tests/engine/test_kill_resume.py SIGKILLs a training run, imported by its configs.

- file backend ``'beit_mm_test_slow_write'``: for the file ``slow_name``, writes half of it into ``<file>.beit_mm.part``,
  creates ``<file>.beit_mm.part.halfway`` and sleeps (a kill mid checkpoint write);
- hook ``beit_mm.PauseAtIterationHook(iteration=k)``: after iteration k's optimizer step, before any other hook,
  creates ``<work_dir>/paused_at_<k>`` (rank 0) and sleeps (a kill with one unsaved step)."""
import os
import os.path as osp
import time
from typing import BinaryIO

from mmengine.dist import is_main_process
from mmengine.fileio import register_backend
from mmengine.hooks import Hook

from beit_mm.fileio.outputs import PARTIAL_SUFFIX, AtomicLocalBackend
from beit_mm.registry import HOOKS

SLEEP_S = 900


class SlowWriteBackend(AtomicLocalBackend):

    def __init__(self, slow_name: str) -> None:
        self.slow_name = slow_name

    def write_temp(self, f: BinaryIO, data: bytes) -> None:
        if not f.name.endswith(self.slow_name + PARTIAL_SUFFIX):
            f.write(data)
            return
        f.write(data[:len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
        open(f.name + '.halfway', 'w').close()
        time.sleep(SLEEP_S)
        f.write(data[len(data) // 2:])


register_backend('beit_mm_test_slow_write', SlowWriteBackend, force=True)


@HOOKS.register_module(force=True)
class PauseAtIterationHook(Hook):
    priority = 'HIGHEST'

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if runner.iter + 1 != self.iteration:
            return
        if is_main_process():
            open(osp.join(runner.work_dir, f'paused_at_{self.iteration}'), 'w').close()
        time.sleep(SLEEP_S)
