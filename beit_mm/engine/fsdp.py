"""FSDP (fully sharded data parallel) pieces for MMEngine's ``FlexibleRunner`` + ``FSDPStrategy``.

``transformer_block_wrap_policy`` makes every BEiT and CvT transformer block its own FSDP unit (plus the root unit
for the embeddings, neck and heads), so only one block's full parameters are gathered at a time. A config names it
by its import path (MMEngine's ``FUNCTIONS`` registry falls back to importing dotted names)::

    strategy = dict(type='FSDPStrategy',
                    model_wrapper=dict(auto_wrap_policy=dict(type='beit_mm.engine.fsdp.transformer_block_wrap_policy'),
                                       use_orig_params=True))

``use_orig_params=True`` keeps the original parameters visible to the optimizer, which layer-wise lr decay needs: its
param groups hold individual parameters (``LayerDecayOptimWrapperConstructor``), while FSDP's default
(``use_orig_params=False``) would only expose one flat parameter per unit.
"""
from __future__ import annotations

from torch import nn
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from ..models.backbones.cvt import CvTBlock
from ..models.layers.beit_block import BEiTBlock

#: Module classes that become FSDP units.
TRANSFORMER_BLOCKS = (BEiTBlock, CvTBlock)


def transformer_block_wrap_policy(module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
    """FSDP ``auto_wrap_policy``: wrap each :data:`TRANSFORMER_BLOCKS` module (torch's
    ``transformer_auto_wrap_policy`` with those classes)."""
    return transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls=set(TRANSFORMER_BLOCKS))
