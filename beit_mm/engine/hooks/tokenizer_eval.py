"""Held-out evaluation of a ``beit_mm.DVAE`` or ``beit_mm.VQKD`` during training."""
from __future__ import annotations

import json
import os
import os.path as osp

from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from PIL import Image

from beit_mm.fileio.outputs import atomic_file
from beit_mm.models.tokenizers.evaluation import evaluate_tokenizer, evaluate_vqkd, load_images, reconstruction_grid
from beit_mm.models.tokenizers.vqkd import VQKD
from beit_mm.registry import HOOKS


@HOOKS.register_module()
class TokenizerEvalHook(Hook):
    """Every ``interval`` iterations and after the last: held-out codebook usage, perplexity and PSNR of a dVAE (with a
    reconstruction grid PNG), or usage, perplexity, dead codes and teacher cosine of a VQ-KD, logged as
    ``heldout_*`` and written to ``work_dir/tokenizer_eval/iter_N.json``.

    Args:
        folder: held-out images; None = the training ``data_root`` joined with ``heldout_prefix``.
        heldout_prefix: the held-out folder inside the training ``data_root``.
        img_size: side the images are resized to.
        num_images: how many images (the first by name) are evaluated.
        interval: iterations between evaluations.
        grid_images: images shown in the PNG grid (a multiple of 8).
    """

    priority = 'ABOVE_NORMAL'  # before the LoggerHook (BELOW_NORMAL)

    def __init__(self, folder: str | None, img_size: int, num_images: int = 256, interval: int = 500,
                 grid_images: int = 32, heldout_prefix: str = 'images/validation') -> None:
        self.folder = folder
        self.heldout_prefix = heldout_prefix
        self.img_size = img_size
        self.num_images = num_images
        self.interval = interval
        self.grid_images = grid_images
        self._images = None

    def before_train(self, runner) -> None:
        if self.folder is None:
            self.folder = osp.join(runner.train_dataloader.dataset.data_root, self.heldout_prefix)
        self._images = load_images(self.folder, self.img_size, self.num_images)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner):
            self.evaluate(runner)

    def evaluate(self, runner) -> dict[str, float]:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        images = self._images.to(next(model.parameters()).device)
        out_dir = osp.join(runner.work_dir, 'tokenizer_eval')
        if isinstance(model, VQKD):
            return self._log_vqkd(runner, model, images, out_dir)
        stats, recs = evaluate_tokenizer(model, images)
        self._update_scalars(runner, stats)
        n = min(self.grid_images, images.shape[0])
        path = osp.join(out_dir, f'iter_{runner.iter + 1}.png')
        if is_main_process():
            os.makedirs(out_dir, exist_ok=True)
            with atomic_file(path) as tmp:
                Image.fromarray(reconstruction_grid(images[:n].cpu(), recs[:n].cpu())).save(tmp, format='PNG')
            self._dump(out_dir, runner, dict(stats, iter=runner.iter + 1, grid=path, num_images=images.shape[0]))
        print_log(f'tokenizer held-out ({images.shape[0]} images of {self.folder}) iter {runner.iter + 1}: '
                  f'usage {stats["usage"]:.4f} perplexity {stats["perplexity"]:.1f} '
                  f'({stats["perplexity_fraction"]:.3f} of {model.vocab_size}) psnr {stats["psnr"]:.2f} dB '
                  f'(mean-colour baseline {stats["psnr_mean_colour"]:.2f} dB); grid {path}', logger='current')
        return stats

    @staticmethod
    def _dump(out_dir: str, runner, record: dict) -> None:
        with atomic_file(osp.join(out_dir, f'iter_{runner.iter + 1}.json')) as tmp, open(tmp, 'w') as f:
            json.dump(record, f, indent=1)

    @staticmethod
    def _update_scalars(runner, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            runner.message_hub.update_scalar(f'train/heldout_{key}', value)

    def _log_vqkd(self, runner, model: VQKD, images, out_dir: str) -> dict[str, float]:
        stats = evaluate_vqkd(model, images)
        self._update_scalars(runner, stats)
        if is_main_process():
            os.makedirs(out_dir, exist_ok=True)
            self._dump(out_dir, runner, dict(stats, iter=runner.iter + 1, num_images=images.shape[0]))
        cosine = f' teacher cosine {stats["teacher_cosine"]:.4f}' if 'teacher_cosine' in stats else ''
        print_log(f'VQ-KD held-out ({images.shape[0]} images of {self.folder}) iter {runner.iter + 1}: '
                  f'usage {stats["usage"]:.4f} ({stats["dead_codes"]} dead of {model.num_codes}) perplexity '
                  f'{stats["perplexity"]:.1f} ({stats["perplexity_fraction"]:.3f}){cosine}', logger='current')
        return stats
