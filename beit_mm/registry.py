"""The registries of scope ``beit_mm``, children of MMEngine's root registries: ``type='beit_mm.<ClassName>'``
reaches beit_mm's classes from any scope, and each imports its ``locations`` on first lookup."""
from __future__ import annotations

from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import OPTIM_WRAPPERS as MMENGINE_OPTIM_WRAPPERS
from mmengine.registry import PARAM_SCHEDULERS as MMENGINE_PARAM_SCHEDULERS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import VISUALIZERS as MMENGINE_VISUALIZERS
from mmengine.registry import Registry

MODELS = Registry('model', parent=MMENGINE_MODELS, scope='beit_mm', locations=['beit_mm.models'])
TRANSFORMS = Registry('transform', parent=MMENGINE_TRANSFORMS, scope='beit_mm', locations=['beit_mm.data'])
DATASETS = Registry('dataset', parent=MMENGINE_DATASETS, scope='beit_mm', locations=['beit_mm.data'])
METRICS = Registry('metric', parent=MMENGINE_METRICS, scope='beit_mm',
                   locations=['beit_mm.evaluation.panoptic_quality', 'beit_mm.evaluation.coco_instance'])
HOOKS = Registry('hook', parent=MMENGINE_HOOKS, scope='beit_mm', locations=['beit_mm.engine'])
OPTIM_WRAPPER_CONSTRUCTORS = Registry(
    'optimizer wrapper constructor',
    parent=MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
    scope='beit_mm',
    locations=['beit_mm.engine'])
OPTIM_WRAPPERS = Registry(
    'optim_wrapper', parent=MMENGINE_OPTIM_WRAPPERS, scope='beit_mm', locations=['beit_mm.engine'])
PARAM_SCHEDULERS = Registry(
    'parameter scheduler', parent=MMENGINE_PARAM_SCHEDULERS, scope='beit_mm', locations=['beit_mm.engine'])
VISUALIZERS = Registry(
    'visualizer', parent=MMENGINE_VISUALIZERS, scope='beit_mm', locations=['beit_mm.visualization.det_visualizer'])


def config_class(type_name, registry: Registry, scope: str | None = None) -> type | None:
    """The class a config's ``type`` builds (a class, or a name looked up in ``registry`` under ``scope`` as MMEngine's
    builders do); None when nothing of that name is registered."""
    if isinstance(type_name, str):
        with registry.switch_scope_and_registry(scope) as scoped:
            type_name = scoped.get(type_name)
    return type_name if isinstance(type_name, type) else None


def config_type_is(type_name, classes, registry: Registry, scope: str | None = None) -> bool:
    """Whether a config's ``type`` builds one of ``classes`` or a subclass (:func:`config_class`).

    Args:
        type_name: ``cfg['type']``: a registered name or a class.
        classes: a class or a tuple of classes.
        registry: the registry the entry is built from.
        scope: the scope to look the name up in.
    """
    found = config_class(type_name, registry, scope)
    return found is not None and issubclass(found, classes)
