"""Stop a segmentation run on bad data before the first iteration, and name the files when a batch brings a bad pair
the start-up sample missed."""
from __future__ import annotations

import time

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.data.checks import (DEFAULT_NUM_SAMPLES, DatasetCheckError, check_loaded_pair, check_seg_dataset,
                                 file_problems, head_classes_problem, leaf_datasets, loader_applies_orientation,
                                 model_head_classes, pipeline_loader)
from beit_mm.data.checks.labels import DETAIL_CHARS
from beit_mm.fileio.names import shown
from beit_mm.registry import HOOKS


@HOOKS.register_module()
class SegDatasetCheckHook(Hook):
    """Checks the training and validation sets in ``before_train``, then every training batch before it is stacked.

    Per batch: the image and annotation headers must agree with what was loaded (size, EXIF orientation, no JPEG
    annotation), and label values must be a class or the ignore index; otherwise the run stops naming the files,
    instead of failing in ``torch.stack`` or ``F.cross_entropy``.

    Args:
        num_samples: pairs decoded per split at start; None decodes all.
        check_val: also check the validation set.
        check_batches: check the labels of every training batch.
    """

    priority = 'VERY_HIGH'

    def __init__(self, num_samples: int | None = DEFAULT_NUM_SAMPLES, check_val: bool = True,
                 check_batches: bool = True) -> None:
        self.num_samples = num_samples
        self.check_val = check_val
        self.check_batches = check_batches
        self._num_classes: int | None = None
        self._ignore_index = 255
        self._applies_orientation = True

    def before_train(self, runner) -> None:
        start = time.perf_counter()
        sets = [('train', runner.train_dataloader.dataset)]
        if self.check_val and runner.val_loop is not None:
            sets.append(('val', runner.val_loop.dataloader.dataset))
        decoded = 0
        for name, dataset in sets:
            decoded += check_seg_dataset(dataset, name, self.num_samples)
        leaves = [d for d in leaf_datasets(runner.train_dataloader.dataset) if hasattr(d, 'metainfo')]
        if leaves and 'classes' in leaves[0].metainfo:
            self._num_classes = len(leaves[0].metainfo['classes'])
            self._ignore_index = int(getattr(leaves[0], 'ignore_index', 255))
        if leaves:
            self._applies_orientation = loader_applies_orientation(*pipeline_loader(leaves[0]))
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        if self._num_classes is not None:
            # every head that predicts classes, auxiliary heads included
            problem = head_classes_problem(model_head_classes(model), self._num_classes,
                                           getattr(leaves[0], 'classes_path', None))
            if problem is not None:
                raise DatasetCheckError(problem)
        runner.logger.info(f'dataset check passed: {", ".join(n for n, _ in sets)} ({decoded} image/annotation '
                           f'pairs decoded, file lists complete) in {time.perf_counter() - start:.1f} s')

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        if not self.check_batches or not isinstance(data_batch, dict):
            return
        for sample in data_batch.get('data_samples') or []:
            seg = getattr(sample, 'gt_sem_seg', None)
            if seg is None:
                continue
            self._check_files(runner, sample.metainfo)
            if self._num_classes is None:
                continue
            labels = seg.data
            bad = (labels >= self._num_classes) & (labels != self._ignore_index)
            if bad.any():
                values = torch.unique(labels[bad]).tolist()[:6]
                path = sample.metainfo.get('seg_map_path', '<unknown annotation>')
                raise DatasetCheckError(
                    f'iteration {runner.iter + 1}: {shown(path)} has label values {values} after loading (num_classes='
                    f'{self._num_classes}, ignore index {self._ignore_index}); cross-entropy would fail with "Target '
                    f'{values[0]} is out of bounds". Fix: check this annotation (and the rest with python '
                    'tools/analysis/check_dataset.py CONFIG), the class count and reduce_zero_label.')

    def _check_files(self, runner, meta: dict) -> None:
        """Raise :class:`DatasetCheckError` when a sample's file headers disagree with what the pipeline loaded."""
        img_path, seg_path, loaded_hw = meta.get('img_path'), meta.get('seg_map_path'), meta.get('ori_shape')
        if not (img_path and seg_path and loaded_hw):
            return
        found = check_loaded_pair(img_path, seg_path, loaded_hw, self._applies_orientation)
        if found is None:
            return
        kind, _, detail = found
        problem = file_problems()[kind]
        raise DatasetCheckError(
            f'iteration {runner.iter + 1}: {shown(img_path)} / {shown(seg_path)} ({shown(detail, DETAIL_CHARS)}): '
            f'{problem.what}. The start-up check '
            'decodes a sample of the pairs; python tools/analysis/check_dataset.py CONFIG checks them all. Fix: '
            f'{problem.fix}')
