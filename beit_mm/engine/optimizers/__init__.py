from .eomt_layer_decay import EoMTLayerDecayOptimWrapperConstructor  # noqa: F401
from .layer_decay import LayerDecayOptimWrapperConstructor  # noqa: F401
