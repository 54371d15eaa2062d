"""TEST SUPPORT ONLY: record what each process draws in a training step, for tests/engine/test_scale.py.

``beit_mm.RecordDrawsHook`` writes ``<work_dir>/draws_rank<r>.json`` at the end of training, per iteration: ``mix``
(the Mixup/CutMix soft labels, ``(B, num_classes)``, 6 digits), ``drop_path`` (per ``DropPath`` call, kept 1 or
dropped 0, ``(B,)``) and ``sampler_seed``."""
import json
import os.path as osp

import torch
from mmcv.cnn.bricks import DropPath
from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.registry import HOOKS


@HOOKS.register_module()
class RecordDrawsHook(Hook):

    def __init__(self) -> None:
        self._iters: list[dict] = []
        self._current: dict | None = None

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        model.data_preprocessor.register_forward_hook(self._record_mix)
        for module in model.modules():
            if isinstance(module, DropPath):
                module.register_forward_hook(self._record_drop_path)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        self._current = dict(mix=None, drop_path=[])
        self._iters.append(self._current)

    def _record_mix(self, module, args, output) -> None:
        if self._current is not None and module.training:
            scores = torch.stack([s.gt_score for s in output['data_samples']])
            self._current['mix'] = [[round(float(v), 6) for v in row] for row in scores]

    def _record_drop_path(self, module, args, output) -> None:
        if self._current is not None and module.training:
            kept = output.flatten(1).abs().sum(1) != 0
            self._current['drop_path'].append([int(k) for k in kept])

    def after_train(self, runner) -> None:
        record = dict(sampler_seed=getattr(runner.train_dataloader.sampler, 'seed', None), iters=self._iters)
        with open(osp.join(runner.work_dir, f'draws_rank{get_rank()}.json'), 'w') as f:
            json.dump(record, f)
