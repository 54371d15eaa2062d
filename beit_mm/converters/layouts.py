"""The checkpoint layouts beit_mm converts, as names only: importing this module imports no converter or model."""
from __future__ import annotations

#: model -> its source layouts (the conversion's ``model``/``source`` choices).
MODELS: dict[str, tuple[str, ...]] = {
    'beit': ('unilm', 'timm', 'hf', 'mmseg', 'mmpretrain'),
    'cvt': ('official', 'hf'),
    'dalle': ('openai', 'mmpretrain', 'dvae'),
    'clip': ('openai', 'hf'),
    'vqkd': ('unilm', 'mmpretrain'),
    'dino': ('official', ),
    'eomt': ('hf', 'beit_mm'),
    'dinov2': ('timm', ),
    'dinov3': ('official', 'hf'),
    'vit_adapter': ('official', ),
    'pmt': ('official', ),
}
#: the ``class_order`` names: a source's order of a dataset's classes.
CLASS_ORDERS = ('ade20k-panoptic', )
