"""FSDP pieces for MMEngine's ``FlexibleRunner``: a wrap policy per transformer block and a fixed strategy."""
from __future__ import annotations

from mmengine._strategy import FSDPStrategy
from mmengine.registry import STRATEGIES
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from ..registry import MODELS
from .optimizers.layer_decay import ORIGINAL_NDIM_ATTR


def declared_wrap_units() -> set[type]:
    """The module classes beit_mm's registered models declare as FSDP units (``fsdp_wrap_units``)."""
    import beit_mm.models  # noqa: F401  (registers the models)
    units: set[type] = set()
    for cls in MODELS.module_dict.values():
        units.update(getattr(cls, 'fsdp_wrap_units', ()))
    return units


def transformer_block_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
    """FSDP ``auto_wrap_policy``: wrap each module of a class in :func:`declared_wrap_units`."""
    return transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls=declared_wrap_units())


@STRATEGIES.register_module()
class TorchFSDPStrategy(FSDPStrategy):
    """MMEngine's ``FSDPStrategy`` that records each parameter's ndim before flattening and loads optimizer state with
    torch >= 2.1's ``optim_state_dict_to_load`` argument order."""

    def build_model(self, model):
        """MMEngine's ``build_model``, then record every parameter's ndim before FSDP flattens it."""
        model = super().build_model(model)
        for param in model.parameters():
            setattr(param, ORIGINAL_NDIM_ATTR, param.ndim)
        return model

    def load_optim_state_dict(self, state_dict: dict) -> None:
        optim_state_dict = FSDP.optim_state_dict_to_load(self.model, self.optim_wrapper.optimizer, state_dict)
        self.optim_wrapper.load_state_dict(optim_state_dict)
