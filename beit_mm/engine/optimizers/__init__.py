from .layer_decay import LayerDecayOptimWrapperConstructor  # noqa: F401
