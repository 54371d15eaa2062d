"""Frozen-feature probes: how well a backbone's patch features segment (and its images classify), without fine-tuning.

Patch features from ``dense_features(x, layers)`` of the model or its backbone and majority patch labels feed a linear
probe and a weighted k-NN (DINO), scored with mmseg's ``IoUMetric``. Nothing here draws random numbers.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..models.builder import feature_module
from ..data.datasets.labeled_sets import LabeledSplit, ade20k_splits

IGNORE_INDEX = 255
# DINO eval_knn.py defaults
KNN_K = 20
KNN_TEMPERATURE = 0.07
# L-BFGS iterations and L2 decay of the linear probe
PROBE_STEPS = 50
PROBE_WEIGHT_DECAY = 1e-4
KNN_CHUNK = 1024


def patch_labels(labels: Tensor, grid: tuple[int, int], num_classes: int) -> Tensor:
    """Majority label of each patch: (N, H, W) int (0..K-1, 255 ignored) -> (N, h, w), 255 where a patch has no
    labeled pixel. H, W must be multiples of h, w. Ties go to the lower class id."""
    n, hh, ww = labels.shape
    h, w = grid
    if hh % h or ww % w:
        raise ValueError(f'label maps {hh}x{ww} do not split into a {h}x{w} patch grid; use an image size that the '
                         'feature grid divides')
    ph, pw = hh // h, ww // w
    patches = labels.reshape(n, h, ph, w, pw).permute(0, 1, 3, 2, 4).reshape(n * h * w, ph * pw)
    valid = patches < num_classes
    index = torch.arange(patches.shape[0]).unsqueeze(1) * num_classes + patches.clamp(max=num_classes - 1)
    counts = torch.bincount(index[valid], minlength=patches.shape[0] * num_classes).view(-1, num_classes)
    out = counts.argmax(1)
    out[counts.sum(1) == 0] = IGNORE_INDEX
    return out.view(n, h, w)


def pixel_normalization(model: nn.Module) -> tuple[Tensor, Tensor]:
    """(mean, std), each (1, 3, 1, 1), of the model's data preprocessor (0 and 1 when it does not normalize)."""
    from mmengine.model import is_model_wrapper
    model = model.module if is_model_wrapper(model) else model
    pre = getattr(model, 'data_preprocessor', None)
    mean, std = getattr(pre, 'mean', None), getattr(pre, 'std', None)
    if mean is None or std is None or not getattr(pre, '_enable_normalize', True):
        return torch.zeros(1, 3, 1, 1), torch.ones(1, 3, 1, 1)
    return mean.detach().float().cpu().view(1, -1, 1, 1), std.detach().float().cpu().view(1, -1, 1, 1)


@torch.no_grad()
def extract_dense_features(model: nn.Module, images: Tensor, layers: Sequence[int] | None = None,
                           batch_size: int = 64) -> Tensor:
    """Frozen patch features (N, C, h, w) on the CPU of ``images`` (N, 3, S, S) RGB 0..255, the ``layers``' maps
    brought to the last layer's grid and concatenated; the model's train/eval mode is restored afterwards."""
    module = feature_module(model)
    mean, std = pixel_normalization(model)
    device = next(module.parameters()).device
    was_training = module.training
    module.eval()
    try:
        out = []
        for x in images.split(batch_size):
            maps = module.dense_features(((x - mean) / std).to(device), layers)
            h, w = maps[-1].shape[-2:]
            out.append(torch.cat([m if m.shape[-2:] == (h, w) else
                                  F.adaptive_avg_pool2d(m, (h, w)) if m.shape[-2] >= h else
                                  F.interpolate(m, (h, w), mode='bilinear', align_corners=False)
                                  for m in maps], 1).float().cpu())
        return torch.cat(out)
    finally:
        module.train(was_training)


def standardize(train: Tensor, *others: Tensor) -> list[Tensor]:
    """Subtract the training features' mean and divide by their std (+1e-6), per feature: (N, C) each."""
    mu, sigma = train.mean(0), train.std(0) + 1e-6
    return [(t - mu) / sigma for t in (train, *others)]


def fit_linear_probe(x: Tensor, y: Tensor, num_classes: int, steps: int = PROBE_STEPS,
                     weight_decay: float = PROBE_WEIGHT_DECAY) -> nn.Linear:
    """Multinomial logistic regression (N, C) -> K classes by full-batch L-BFGS from zero weights, L2 decay."""
    clf = nn.Linear(x.shape[1], num_classes)
    nn.init.zeros_(clf.weight)
    nn.init.zeros_(clf.bias)
    opt = torch.optim.LBFGS(clf.parameters(), lr=1, max_iter=steps, history_size=10, line_search_fn='strong_wolfe')

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(clf(x), y) + 0.5 * weight_decay * clf.weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return clf


@torch.no_grad()
def knn_predict(train: Tensor, train_labels: Tensor, query: Tensor, num_classes: int, k: int = KNN_K,
                temperature: float = KNN_TEMPERATURE) -> Tensor:
    """Weighted k-NN (DINO ``eval_knn.py``): cosine similarity, the ``k`` nearest training samples vote for their
    class with weight exp(sim / T); (M, C) queries -> (M,) predicted classes."""
    train = F.normalize(train, dim=1)
    k = min(k, train.shape[0])
    preds = []
    for q in F.normalize(query, dim=1).split(KNN_CHUNK):
        sim, idx = (q @ train.T).topk(k, dim=1)
        votes = torch.zeros(q.shape[0], num_classes).scatter_add_(1, train_labels[idx], (sim / temperature).exp())
        preds.append(votes.argmax(1))
    return torch.cat(preds)


def segmentation_metrics(pred: Tensor, target: Tensor, num_classes: int) -> dict[str, float]:
    """mIoU / mAcc / aAcc (percent) of predicted vs target labels (target 255 ignored), with mmseg's ``IoUMetric``."""
    from mmseg.evaluation.metrics import IoUMetric
    areas = IoUMetric.intersect_and_union(pred.flatten(), target.flatten(), num_classes, IGNORE_INDEX)
    metrics = IoUMetric.total_area_to_metrics(*areas, metrics=['mIoU'])
    return dict(mIoU=100 * float(np.nanmean(metrics['IoU'])), mAcc=100 * float(np.nanmean(metrics['Acc'])),
                aAcc=100 * float(metrics['aAcc']))


def majority_metrics(train_counts: np.ndarray, val_counts: np.ndarray) -> dict[str, float]:
    """mIoU / mAcc / aAcc (percent) and ``majority_class`` of predicting the most frequent training class, from
    per-class counts (K,) of the training and validation labels."""
    from mmseg.evaluation.metrics import IoUMetric
    majority = int(np.argmax(train_counts))
    val = torch.as_tensor(val_counts, dtype=torch.float64)
    pred = torch.zeros_like(val)
    pred[majority] = val.sum()
    intersect = torch.zeros_like(val)
    intersect[majority] = val[majority]
    metrics = IoUMetric.total_area_to_metrics(intersect, val + pred - intersect, pred, val, metrics=['mIoU'])
    return dict(mIoU=100 * float(np.nanmean(metrics['IoU'])), mAcc=100 * float(np.nanmean(metrics['Acc'])),
                aAcc=100 * float(metrics['aAcc']), majority_class=majority)


class DenseProbe:
    """The dense probe of one labeled set: the data are loaded once, :meth:`evaluate` scores any model on them.

    Args:
        train: the split the probe and the k-NN bank are fit on.
        val: the split they are scored on.
        layers: blocks/levels passed to ``dense_features`` (None: the backbone's segmentation layers).
        knn_k, knn_temperature: the k-NN vote (DINO: 20, 0.07).
        steps, weight_decay: the linear probe's L-BFGS iterations and L2 weight decay.
        batch_size: images per forward pass.
    """

    def __init__(self, train: LabeledSplit, val: LabeledSplit, layers: Sequence[int] | None = None,
                 knn_k: int = KNN_K, knn_temperature: float = KNN_TEMPERATURE, steps: int = PROBE_STEPS,
                 weight_decay: float = PROBE_WEIGHT_DECAY, batch_size: int = 64) -> None:
        if train.num_classes != val.num_classes:
            raise ValueError(f'the splits have {train.num_classes} and {val.num_classes} classes')
        self.train, self.val = train, val
        self.num_classes = train.num_classes
        self.layers = None if layers is None else tuple(layers)
        self.knn_k, self.knn_temperature = knn_k, knn_temperature
        self.steps, self.weight_decay = steps, weight_decay
        self.batch_size = batch_size

    @classmethod
    def from_root(cls, data_root: str, num_classes: int, img_size: int, num_train: int | None = None,
                  num_val: int | None = None, img_suffix: str = '.jpg', seg_map_suffix: str = '.png',
                  **kwargs) -> 'DenseProbe':
        """The probe of an ADE20K-layout root (:func:`beit_mm.data.datasets.labeled_sets.ade20k_splits`)."""
        return cls(*ade20k_splits(data_root, num_classes, img_size, num_train, num_val, img_suffix, seg_map_suffix),
                   **kwargs)

    def patches(self, features: Tensor, split: LabeledSplit) -> tuple[Tensor, Tensor]:
        """Labeled patches of a split: features (M, C) and labels (M,) of the patches with a label."""
        labels = patch_labels(split.labels, tuple(features.shape[-2:]), self.num_classes).flatten()
        features = features.permute(0, 2, 3, 1).flatten(0, 2)
        keep = labels != IGNORE_INDEX
        return features[keep], labels[keep]

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Probe ``model``: linear-probe ``probe_*``, k-NN ``knn_*`` and ``majority_*`` metrics in percent on the
        validation patches, and the patch counts."""
        x_train, y_train = self.patches(extract_dense_features(model, self.train.images, self.layers,
                                                               self.batch_size), self.train)
        x_val, y_val = self.patches(extract_dense_features(model, self.val.images, self.layers, self.batch_size),
                                    self.val)
        if not len(y_train) or not len(y_val):
            raise ValueError(f'no labeled patch in {self.train.source if not len(y_train) else self.val.source}: '
                             f'every label is outside 1..{self.num_classes}')
        x_train, x_val = standardize(x_train, x_val)
        clf = fit_linear_probe(x_train, y_train, self.num_classes, self.steps, self.weight_decay)
        with torch.no_grad():
            probe = segmentation_metrics(clf(x_val).argmax(1), y_val, self.num_classes)
        knn = segmentation_metrics(knn_predict(x_train, y_train, x_val, self.num_classes, self.knn_k,
                                               self.knn_temperature), y_val, self.num_classes)
        majority = majority_metrics(np.bincount(y_train.numpy(), minlength=self.num_classes),
                                    np.bincount(y_val.numpy(), minlength=self.num_classes))
        return dict(probe_mIoU=probe['mIoU'], probe_mAcc=probe['mAcc'], probe_aAcc=probe['aAcc'],
                    knn_acc=knn['aAcc'], knn_mIoU=knn['mIoU'], majority_mIoU=majority['mIoU'],
                    majority_mAcc=majority['mAcc'], majority_aAcc=majority['aAcc'],
                    num_train_patches=int(len(y_train)), num_val_patches=int(len(y_val)))


def classification_probe(model: nn.Module, train: tuple[Tensor, Tensor], val: tuple[Tensor, Tensor],
                         num_classes: int, layers: Sequence[int] | None = None, knn_k: int = KNN_K,
                         knn_temperature: float = KNN_TEMPERATURE, steps: int = PROBE_STEPS,
                         weight_decay: float = PROBE_WEIGHT_DECAY, batch_size: int = 64) -> dict[str, float]:
    """Top-1 (percent) of a k-NN (DINO) and of a linear probe on the grid-averaged dense features (N, C) of
    ``(images, labels)`` pairs; ``majority_top1`` = predicting the most frequent training class."""
    feats = [extract_dense_features(model, images, layers, batch_size).mean((2, 3)) for images, _ in (train, val)]
    x_train, x_val = standardize(*feats)
    y_train, y_val = train[1], val[1]
    clf = fit_linear_probe(x_train, y_train, num_classes, steps, weight_decay)
    with torch.no_grad():
        linear = (clf(x_val).argmax(1) == y_val).float().mean().item()
    knn = (knn_predict(x_train, y_train, x_val, num_classes, knn_k, knn_temperature) == y_val).float().mean().item()
    majority = (y_val == torch.bincount(y_train, minlength=num_classes).argmax()).float().mean().item()
    return dict(knn_top1=100 * knn, linear_top1=100 * linear, majority_top1=100 * majority)
