"""The registries of scope ``beit_mm``; the only module that creates them.

Each is a child of MMEngine's root registry, so configs of any OpenMMLab scope reach beit_mm's classes as
``type='beit_mm.<ClassName>'`` (registry name = class name), and beit_mm's own configs (``default_scope='beit_mm'``)
still find mmseg/mmpretrain/mmengine classes through the parent chain when they are spelled with their scope.
"""
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
METRICS = Registry(
    'metric', parent=MMENGINE_METRICS, scope='beit_mm', locations=['beit_mm.evaluation.panoptic_quality'])
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
# imported when a config names one (beit_mm.visualization needs matplotlib; the package does not import it)
VISUALIZERS = Registry(
    'visualizer', parent=MMENGINE_VISUALIZERS, scope='beit_mm', locations=['beit_mm.visualization.det_visualizer'])


def config_class(type_name, registry: Registry, scope: str | None = None) -> type | None:
    """The class a config's ``type`` builds: a class as it is, a name looked up as MMEngine's builders look it up (in
    ``registry`` under ``scope``, else the current default scope; scoped names such as ``'mmseg.LoadAnnotations'``
    too); None when nothing of that name is registered."""
    if isinstance(type_name, str):
        with registry.switch_scope_and_registry(scope) as scoped:
            type_name = scoped.get(type_name)
    return type_name if isinstance(type_name, type) else None


def config_type_is(type_name, classes, registry: Registry, scope: str | None = None) -> bool:
    """Whether a config's ``type`` builds one of ``classes`` or a subclass (:func:`config_class`): what a config entry
    is, asked of the class it builds, never of its name string.

    Args:
        type_name: ``cfg['type']``: a registered name or a class.
        classes: a class or a tuple of classes.
        registry: the registry the entry is built from (``MODELS``, ``TRANSFORMS``, ``OPTIMIZERS``, ``HOOKS``, ...).
        scope: the scope to look the name up in.
    """
    found = config_class(type_name, registry, scope)
    return found is not None and issubclass(found, classes)
