"""Trivial baselines of a config's metric: what a model scores without looking at the images."""
from __future__ import annotations

from mmengine.config import Config
from mmengine.registry import init_default_scope


def panoptic_prior_baseline(config: str, cfg_options: dict | None = None, grid: int = 64) -> dict[str, float]:
    """PQ/SQ/RQ of the positional prior (:mod:`beit_mm.evaluation.panoptic_prior`) of ``config``'s training set on
    its test set.

    Raises:
        ValueError: the config's test metric is not ``beit_mm.PanopticQualityMetric``.
    """
    import beit_mm  # noqa: F401  (registrations)
    from beit_mm.registry import DATASETS, METRICS
    from ..evaluation.panoptic_prior import prior_panoptic_quality
    from ..evaluation.panoptic_quality import PanopticQualityMetric
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    metric = METRICS.build(cfg.test_evaluator)
    if not isinstance(metric, PanopticQualityMetric):
        raise ValueError(f'{config} is scored by {type(metric).__name__}, not beit_mm.PanopticQualityMetric: the '
                         'positional prior is a panoptic prediction. Fix: give a panoptic config')
    train = DATASETS.build(cfg.train_dataloader.dataset)
    test = DATASETS.build(cfg.test_dataloader.dataset)
    return prior_panoptic_quality(train, test, metric, grid)
