"""Is pretraining working? The dense probe of the frozen features, every ``interval`` iterations of a run.

A MIM run's masked-token accuracy does not say whether the features segment better; this hook measures it with
:class:`beit_mm.evaluation.probe.DenseProbe` on a small labeled set, beside the iteration-0 and majority numbers.
"""
from __future__ import annotations

import json
import os.path as osp
import time
from collections.abc import Sequence

from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log

from beit_mm.evaluation.probe import KNN_K, KNN_TEMPERATURE, PROBE_STEPS, PROBE_WEIGHT_DECAY, DenseProbe
from beit_mm.fileio.outputs import atomic_file
from beit_mm.registry import HOOKS

LOGGED = ('probe_mIoU', 'probe_mAcc', 'knn_acc')


@HOOKS.register_module()
class DenseProbeHook(Hook):
    """Every ``interval`` iterations (and after the last): probe mIoU / mAcc and k-NN accuracy of the model's frozen
    patch features, logged as ``train/<name>`` beside the iteration-0 and majority references, and written to
    ``work_dir/dense_probe.json``. Warns once when the probe never beats iteration 0 by ``min_gain`` within
    ``patience`` checks, and once when it falls ``max_falls`` checks in a row; the curve is kept in checkpoints.

    Args:
        data_root: labeled ADE20K-layout root (``images/{training,validation}``, ``annotations/...``, raw ids 1..K).
        num_classes: K.
        img_size: side the images are resized to (a multiple of the patch size).
        interval: iterations between checks.
        num_train, num_val: images the probe is fit and scored on (the first by file name; None = all).
        layers: blocks/levels probed (None: those a segmentor of the backbone reads).
        patience: checks after iteration 0 before the "not better than init" warning.
        min_gain: probe mIoU points over iteration 0 that count as better.
        max_falls: consecutive falls of the probe mIoU that trigger the "falling" warning.
        img_suffix, seg_map_suffix, knn_k, knn_temperature, probe_steps, probe_weight_decay, batch_size: as
            ``DenseProbe``.
    """

    priority = 'ABOVE_NORMAL'  # before the LoggerHook (BELOW_NORMAL)

    def __init__(self, data_root: str, num_classes: int, img_size: int, interval: int = 500,
                 num_train: int | None = 128, num_val: int | None = 64, layers: Sequence[int] | None = None,
                 img_suffix: str = '.jpg', seg_map_suffix: str = '.png', patience: int = 3, min_gain: float = 1.0,
                 max_falls: int = 3, knn_k: int = KNN_K, knn_temperature: float = KNN_TEMPERATURE,
                 probe_steps: int = PROBE_STEPS, probe_weight_decay: float = PROBE_WEIGHT_DECAY,
                 batch_size: int = 64) -> None:
        if interval < 1 or patience < 1 or max_falls < 1:
            raise ValueError(f'interval ({interval}), patience ({patience}) and max_falls ({max_falls}) must be >= 1')
        self.data_root, self.num_classes, self.img_size = data_root, num_classes, img_size
        self.interval = interval
        self.num_train, self.num_val = num_train, num_val
        self.layers = None if layers is None else tuple(layers)
        self.img_suffix, self.seg_map_suffix = img_suffix, seg_map_suffix
        self.patience, self.min_gain, self.max_falls = patience, min_gain, max_falls
        self.probe_kwargs = dict(knn_k=knn_k, knn_temperature=knn_temperature, steps=probe_steps,
                                 weight_decay=probe_weight_decay, batch_size=batch_size)
        self.probe = None
        self.init_metrics: dict | None = None
        self.history: list[dict] = []
        self.warned: list[str] = []
        self.seconds = 0.0
        self._start = 0.0

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint.setdefault('meta', {})['dense_probe'] = dict(init=self.init_metrics, history=self.history,
                                                                warned=self.warned)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        state = checkpoint.get('meta', {}).get('dense_probe')
        if state:
            self.init_metrics, self.history, self.warned = state['init'], state['history'], state['warned']

    def before_train(self, runner) -> None:
        self._start = time.perf_counter()
        start = time.perf_counter()
        self.probe = DenseProbe.from_root(self.data_root, self.num_classes, self.img_size, self.num_train,
                                          self.num_val, self.img_suffix, self.seg_map_suffix, layers=self.layers,
                                          **self.probe_kwargs)
        self.seconds += time.perf_counter() - start
        if self.init_metrics is None:
            if runner.iter > 0:
                print_log(f'dense probe: the run resumes at iteration {runner.iter} from a checkpoint without the '
                          'iteration-0 probe; the probe curve is logged without its init reference', logger='current')
            else:
                self.init_metrics = self._measure(runner)
                self._log(runner, self.init_metrics, 'iteration 0 (init)')
                self._dump(runner)
        if self.init_metrics is not None:
            runner.message_hub.update_scalar('train/probe_mIoU_init', self.init_metrics['probe_mIoU'])
            runner.message_hub.update_scalar('train/knn_acc_init', self.init_metrics['knn_acc'])
            runner.message_hub.update_scalar('train/probe_mIoU_majority', self.init_metrics['majority_mIoU'])

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner):
            self.check(runner)

    def check(self, runner) -> dict:
        """Probe the model now, log it, store it in the curve and warn when the curve says so."""
        metrics = self._measure(runner)
        metrics['iter'] = runner.iter + 1
        self.history.append(metrics)
        for key in LOGGED:
            runner.message_hub.update_scalar(f'train/{key}', metrics[key])
        self._log(runner, metrics, f'iteration {metrics["iter"]}')
        self._dump(runner)
        for message in self.warnings():
            runner.logger.warning(message)
        return metrics

    def warnings(self) -> list[str]:
        """The warnings the curve calls for now, each given once per run."""
        out = []
        curve = [m['probe_mIoU'] for m in self.history]
        if self.init_metrics is not None and 'not_better' not in self.warned and len(curve) >= self.patience:
            init = self.init_metrics['probe_mIoU']
            if max(curve) < init + self.min_gain:
                self.warned.append('not_better')
                out.append(
                    f'dense probe: after {len(curve)} checks ({self.history[-1]["iter"]} iterations) the frozen '
                    f'features are no better for segmentation than at iteration 0: probe mIoU {curve[-1]:.2f} now, '
                    f'best {max(curve):.2f}, {init:.2f} at init (majority class '
                    f'{self.history[-1]["majority_mIoU"]:.2f}). '
                    'Pretraining is not working: check the learning rate and its schedule (a zero or tiny lr leaves '
                    'the weights where they started), that the loss goes down, and the targets (tokenizer '
                    'checkpoint, masking).')
        falls = 0
        for previous, current in zip(curve, curve[1:]):
            falls = falls + 1 if current < previous else 0
        if 'falling' not in self.warned and falls >= self.max_falls:
            self.warned.append('falling')
            tail = ' -> '.join(f'{v:.2f}' for v in curve[-self.max_falls - 1:])
            out.append(f'dense probe: the probe mIoU fell at {falls} checks in a row ({tail} at iterations '
                       f'{self.history[-self.max_falls - 1]["iter"]}..{self.history[-1]["iter"]}): the features are '
                       'getting worse for segmentation. Check the learning rate (too high?), the loss curve, and '
                       'whether the pretext task has collapsed (e.g. a constant target).')
        return out

    def _measure(self, runner) -> dict:
        start = time.perf_counter()
        metrics = self.probe.evaluate(runner.model)
        self.seconds += time.perf_counter() - start
        return metrics

    def _dump(self, runner) -> None:
        """The curve so far in ``work_dir/dense_probe.json`` (main process)."""
        if is_main_process():
            with atomic_file(osp.join(runner.work_dir, 'dense_probe.json')) as tmp, open(tmp, 'w') as f:
                json.dump(dict(init=self.init_metrics, history=self.history, data_root=self.data_root,
                               num_classes=self.num_classes, layers=self.layers, probe_seconds=self.seconds), f,
                          indent=1)

    def _log(self, runner, metrics: dict, when: str) -> None:
        ref = self.init_metrics if self.init_metrics is not metrics else None
        init = (f' (init {ref["probe_mIoU"]:.2f} / {ref["probe_mAcc"]:.2f} / {ref["knn_acc"]:.2f})'
                if ref is not None else '')
        wall = time.perf_counter() - self._start
        print_log(f'dense probe {when}: probe mIoU {metrics["probe_mIoU"]:.2f} mAcc {metrics["probe_mAcc"]:.2f}, '
                  f'k-NN acc {metrics["knn_acc"]:.2f}{init}; majority class mIoU {metrics["majority_mIoU"]:.2f} '
                  f'mAcc {metrics["majority_mAcc"]:.2f} ({metrics["num_val_patches"]} validation patches of '
                  f'{self.data_root}); probe time {self.seconds:.1f} s, {100 * self.seconds / max(wall, 1e-9):.1f}% '
                  'of the wall time so far', logger='current')
