"""``beit_mm.CompileHook``: the config's ``compile`` setting applied to the runner's model before training.

Validation and testing run eagerly unless ``inference=True``: their image sizes vary, and a graph per size costs more
than it saves."""
from __future__ import annotations

import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from ...registry import HOOKS
from ..compile import COMPILE_DEFAULTS, compile_model, compile_settings


@HOOKS.register_module()
class CompileHook(Hook):
    """Compile the model once, where its parameters' device type is in ``devices``.

    Args:
        scope: ``'model'`` (whole, or what the model's ``compile_units()`` names) or ``'blocks'``.
        devices: device types on which to compile (default ``('cuda',)``).
        inference: also compile validation and test.
        **options: ``torch.compile`` options (``backend``, ``mode``, ``fullgraph``, ``dynamic``).
    """

    priority = 'VERY_HIGH'

    def __init__(self, scope: str = 'model', devices: tuple[str, ...] = ('cuda', ), inference: bool = False,
                 **options) -> None:
        settings = compile_settings(dict(options, scope=scope, devices=devices))
        self.scope, self.devices = settings.pop('scope'), settings.pop('devices')
        self.inference = inference
        self.options = settings
        self.compiled = False
        self._stance = None

    def _compile(self, runner) -> None:
        if self.compiled:
            return
        self.compiled = True
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        device = next(model.parameters()).device.type
        if device not in self.devices:
            print_log(f'compile: not on {device} (compile devices={list(self.devices)}); running eagerly',
                      logger='current')
            return
        units = compile_model(model, self.scope, **self.options)
        options = {**COMPILE_DEFAULTS, **self.options}
        print_log(f'compile: torch.compile({options}) of {len(units)} module(s), scope={self.scope!r}: '
                  f'{sorted({getattr(u, "__qualname__", type(u).__name__) for u in units})}', logger='current')

    def before_train(self, runner) -> None:
        self._compile(runner)

    def _eager_inference(self, runner) -> None:
        if self.inference:
            self._compile(runner)
        else:
            self._stance = torch.compiler.set_stance('force_eager')
            self._stance.__enter__()

    def _end_inference(self) -> None:
        if self._stance is not None:
            self._stance.__exit__(None, None, None)
            self._stance = None

    def before_val(self, runner) -> None:
        self._eager_inference(runner)

    def after_val(self, runner) -> None:
        self._end_inference()

    def before_test(self, runner) -> None:
        self._eager_inference(runner)

    def after_test(self, runner) -> None:
        self._end_inference()


def use_compile_hook(cfg: Config, backend: str | None = None) -> None:
    """Move the config's ``compile`` setting into a ``beit_mm.CompileHook`` and turn MMEngine's own off; ``backend``
    compiles on every device with that backend."""
    settings = compile_settings(cfg.get('compile'))
    if backend is not None:
        settings = dict(settings or compile_settings(True), backend=backend, devices=('cpu', 'cuda'))
    cfg.compile = False
    if settings is None:
        return
    hooks = [dict(h) for h in cfg.get('custom_hooks') or []
             if str(h.get('type', '')).split('.')[-1] != 'CompileHook']
    hooks.append(dict(type='beit_mm.CompileHook', **settings))
    cfg.custom_hooks = hooks
