"""FSDP pieces for MMEngine's ``FlexibleRunner`` + ``FSDPStrategy``.

``transformer_block_wrap_policy`` makes every transformer block (the classes the backbones declare in
``fsdp_wrap_units``, as HF's ``_no_split_modules``) its own FSDP unit; ``use_orig_params=True`` keeps the parameters
visible one by one, as layer-wise lr decay's param groups need::

    strategy = dict(type='FSDPStrategy',
                    model_wrapper=dict(auto_wrap_policy=dict(type='beit_mm.engine.fsdp.transformer_block_wrap_policy'),
                                       use_orig_params=True))
"""
from __future__ import annotations

from mmengine._strategy import FSDPStrategy
from mmengine.registry import STRATEGIES
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from ..registry import MODELS
from .optimizers.layer_decay import ORIGINAL_NDIM_ATTR


def declared_wrap_units() -> set[type]:
    """The module classes every model registered in beit_mm's ``MODELS`` declares as its FSDP units
    (``fsdp_wrap_units``, a tuple of classes)."""
    import beit_mm.models  # noqa: F401  (registers the models)
    units: set[type] = set()
    for cls in MODELS.module_dict.values():
        units.update(getattr(cls, 'fsdp_wrap_units', ()))
    return units


def transformer_block_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
    """FSDP ``auto_wrap_policy``: wrap each module whose class a registered model declares in ``fsdp_wrap_units``
    (torch's ``transformer_auto_wrap_policy`` with those classes)."""
    return transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls=declared_wrap_units())


@STRATEGIES.register_module()
class TorchFSDPStrategy(FSDPStrategy):
    """MMEngine 0.10.7's ``FSDPStrategy`` with two fixes.

    - ``build_model`` records each parameter's ndim (``ORIGINAL_NDIM_ATTR``) before FSDP flattens it, so that the
      layer-decay constructor's "no weight decay for 1-D parameters" does not exempt every flat shard.
    - ``load_optim_state_dict`` passes torch >= 2.1's argument order to ``FSDP.optim_state_dict_to_load`` (MMEngine's
      torch 2.0 order fails ``--resume`` with ``TypeError: unhashable type: 'dict'``).
    """

    def build_model(self, model):
        """MMEngine's ``build_model``, then record every parameter's ndim before FSDP flattens it."""
        model = super().build_model(model)
        for param in model.parameters():
            setattr(param, ORIGINAL_NDIM_ATTR, param.ndim)
        return model

    def load_optim_state_dict(self, state_dict: dict) -> None:
        optim_state_dict = FSDP.optim_state_dict_to_load(self.model, self.optim_wrapper.optimizer, state_dict)
        self.optim_wrapper.load_state_dict(optim_state_dict)
