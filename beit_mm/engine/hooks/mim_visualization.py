"""Draw what masked image modeling predicts during training (image, mask, tokenizer reconstruction, prediction).

Not imported by ``beit_mm``: a config lists ``'beit_mm.engine.hooks.mim_visualization'`` in ``custom_imports``.
"""
from __future__ import annotations

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from beit_mm.registry import HOOKS

from ...models.builder import load_model
from ...visualization.figures import mim_figure, to_uint8
from ...visualization.mim import mim_pictures


@HOOKS.register_module()
class MIMVisualizationHook(Hook):
    """Add the MIM picture of the batch's first image to the runner's visualizer every ``interval`` iterations.

    Args:
        dvae_config: config of the ``beit_mm.DVAE`` whose encoder is the MIM model's tokenizer.
        dvae_checkpoint: its checkpoint file or work dir.
        interval: training iterations between pictures.
    """
    priority = 'LOW'

    def __init__(self, dvae_config: str, dvae_checkpoint: str, interval: int = 100) -> None:
        if interval < 1:
            raise ValueError(f'interval={interval} must be >= 1')
        self.dvae_config = dvae_config
        self.dvae_checkpoint = dvae_checkpoint
        self.interval = interval
        self.dvae = None

    def before_train(self, runner) -> None:
        self.dvae, _ = load_model(self.dvae_config, self.dvae_checkpoint, need=('decoder.', ))
        self.dvae.to(next(runner.model.parameters()).device)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None, outputs=None) -> None:
        if not (self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner)):
            return
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        with torch.no_grad():
            inputs = model.data_preprocessor(data_batch, training=False)['inputs']
        images, target, mask = inputs['images'][:1], inputs['target_images'][:1], inputs['mask'][:1]
        pics = mim_pictures(model, self.dvae, images, target, mask)
        pre = model.data_preprocessor
        image = to_uint8((images[0] * pre.std[0] + pre.mean[0]) / 255)
        picture = mim_figure(image, to_uint8(target[0] / 255), pics,
                             title=f'iteration {runner.iter + 1}')
        runner.visualizer.add_image('mim', picture, step=runner.iter + 1)
