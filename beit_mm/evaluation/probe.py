"""Frozen-feature probes: how good are a backbone's patch features for segmentation (and its images for
classification), without fine-tuning. One module for ``beit_mm.DenseProbeHook`` (during pretraining),
``tools/analysis/probe.py`` (any checkpoint) and ``tools/analysis/mim_study.py`` (the study's frozen-feature check).

Dense (patch-level) probe on a labeled set in the ADE20K layout::

    images  (N, 3, S, S) RGB 0..255, resized to S x S (bicubic)        loaded through mmseg's ADE20KDataset
    labels  (N, S, S) mmseg's convention: raw 1..K -> 0..K-1, 0 and every id > K -> 255 (ignored)
    feats   = model's dense_features(normalized images, layers)      list of (N, C_l, h_l, w_l), frozen, eval mode
            -> each level average-pooled (or bilinearly resized) to the last level's grid (h, w), concatenated
               over levels: (N, sum C_l, h, w)
    patch label = the most frequent non-ignored label among the patch's S/h x S/w pixels, 255 when none
    linear probe: multinomial logistic regression on standardized features (training-split mean/std), full-batch
               L-BFGS, L2 weight decay; scored on the validation patches as mIoU / mAcc / aAcc with mmseg's
               ``IoUMetric`` formulas (classes absent from both prediction and label are left out of the means)
    k-NN:     cosine similarity of L2-normalized standardized features, the k nearest training patches vote with
               weight exp(similarity / T) (DINO's ``eval_knn.py``: k 20, T 0.07); accuracy (and mIoU) on the
               validation patches
    majority: the most frequent training patch label predicted everywhere: the floor every probe must beat

The model side is one method, asked of the model (``model.dense_features`` when the model has it, e.g.
``beit_mm.DVAE``, else ``model.backbone.dense_features``: ``beit_mm.BEiT``, ``beit_mm.CvT``; a VQ-KD tokenizer or any
new backbone plugs in by implementing it)::

    dense_features(x: (B, 3, H, W) normalized as the model's data preprocessor does, layers: Sequence[int] | None)
        -> list of (B, C_l, h_l, w_l), one per layer; layers None = the layers a segmentor of that backbone uses

The pixels are normalized with the ``mean``/``std`` buffers of ``model.data_preprocessor`` (RGB order).

Image-level (classification) probe on an ImageNet-layout folder (``root/{train,val}/<class>/*``): the dense features
average-pooled over the grid (N, C), then the same k-NN (top-1) and linear probe (top-1).

Nothing here draws random numbers: the probe of the same features gives the same numbers, and a probe inside a
training run leaves the run's random state untouched.
"""
from __future__ import annotations

import os
import os.path as osp
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor, nn

from ..fileio.inputs import open_image

# mmseg's ignore index (``BaseSegDataset`` / ``IoUMetric`` default)
IGNORE_INDEX = 255
# DINO ``eval_knn.py`` defaults (``--nb_knn 20``, ``--temperature 0.07``)
KNN_K = 20
KNN_TEMPERATURE = 0.07
# Linear probe: L-BFGS iterations and L2 weight decay. A convex problem: on the study's 6144 patches x 512 features the
# validation mIoU moves by < 1 point between 25 and 200 iterations (training accuracy 0.809 -> 0.827), so 50; the
# weight decay only keeps separable classes finite.
PROBE_STEPS = 50
PROBE_WEIGHT_DECAY = 1e-4
# k-NN queries per block (bounds the (block, N_train) similarity matrix)
KNN_CHUNK = 1024


# --------------------------------------------------------------------------------------------------------- data
class LabeledDataError(FileNotFoundError):
    """A labeled or image root has no (or unpaired) files of the expected suffix; the message names what was looked
    for, where, what was found and the fix."""


def describe_files(directory: str, limit: int = 4) -> str:
    """What a folder holds, by suffix: 'found 400 *.png, 2 *.txt' (recursive), or 'the folder does not exist'."""
    if not osp.isdir(directory):
        return 'the folder does not exist'
    counts: Counter = Counter()
    for _, _, files in os.walk(directory):
        counts.update(osp.splitext(f)[1] or '(no suffix)' for f in files)
    if not counts:
        return 'found no files'
    return 'found ' + ', '.join(f'{n} *{s}' for s, n in counts.most_common(limit))


def ade20k_dataset_cfg(data_root: str, split: str, num_classes: int, img_suffix: str = '.jpg',
                       seg_map_suffix: str = '.png', limit: int | None = None) -> dict:
    """The mmseg ``ADE20KDataset`` config of one split (``'training'`` | ``'validation'``) of an ADE20K-layout root
    with raw ids 1..K as the classes (ADE20K's first K class names) and, when given, only its first ``limit`` images
    in file-name order."""
    from mmseg.datasets import ADE20KDataset
    names = ADE20KDataset.METAINFO['classes']
    if not 1 <= num_classes <= len(names):
        raise ValueError(f'num_classes={num_classes}: the ADE20K layout has class ids 1..{len(names)}')
    return dict(type='ADE20KDataset', data_root=data_root,
                data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}'),
                img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, reduce_zero_label=True,
                metainfo=dict(classes=tuple(names[:num_classes])), indices=limit)


def build_seg_dataset(dataset_cfg: dict):
    """Build an mmseg segmentation dataset (any ``BaseSegDataset``, file names free, its ``img_suffix`` and
    ``seg_map_suffix``) without a pipeline, after checking that its image folder holds images of that suffix and
    that every image has its annotation; :class:`LabeledDataError` names what was looked for, where and what was
    found otherwise."""
    import mmseg.datasets  # noqa: F401  (registers the dataset classes)
    from mmseg.registry import DATASETS
    cfg = dict(dataset_cfg, pipeline=[], serialize_data=False, lazy_init=True)
    cfg.pop('test_mode', None)
    with DATASETS.switch_scope_and_registry('mmseg') as registry:  # whatever the run's default scope is
        dataset = registry.build(cfg)
    img_dir, seg_dir = dataset.data_prefix.get('img_path', ''), dataset.data_prefix.get('seg_map_path', '')
    img_suffix, seg_suffix = dataset.img_suffix, dataset.seg_map_suffix
    fix = ('Fix: pass the suffix the files have (img_suffix / seg_map_suffix of the dataset config; '
           '--img-suffix / --seg-map-suffix of the tools) or point the root at an ADE20K-layout folder '
           '(images/{training,validation}, annotations/{training,validation})')
    if not (osp.isdir(img_dir) and any(f.endswith(img_suffix) for _, _, fs in os.walk(img_dir) for f in fs)):
        raise LabeledDataError(f'0 images matched *{img_suffix} in {img_dir}; {describe_files(img_dir)}. {fix}')
    dataset.full_init()
    missing = [d['seg_map_path'] for d in (dataset.get_data_info(i) for i in range(len(dataset)))
               if not osp.isfile(d['seg_map_path'])]
    if missing:
        raise LabeledDataError(
            f'{len(missing)} of {len(dataset)} images in {img_dir} have no annotation *{seg_suffix} in {seg_dir} '
            f'(first: {missing[0]}); {describe_files(seg_dir)}. {fix}')
    return dataset


@dataclass
class LabeledSplit:
    """Images (N, 3, S, S) float RGB 0..255 and label maps (N, S, S) int64 (0..K-1, 255 ignored) of one split."""
    images: Tensor
    labels: Tensor
    num_classes: int
    source: str  # the image folder, for messages


def load_seg_split(dataset, img_size: int) -> LabeledSplit:
    """Every sample of an mmseg segmentation dataset (:func:`build_seg_dataset`), resized to ``img_size`` squared
    (images bicubic, labels nearest); labels through mmseg's ``LoadAnnotations`` (``reduce_zero_label`` and the
    dataset's ``label_map``, so ids outside the classes become 255)."""
    from mmseg.datasets.transforms import LoadAnnotations
    load = LoadAnnotations()  # reduce_zero_label and label_map from the data info (the dataset's)
    images, labels = [], []
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        image = open_image(info['img_path']).convert('RGB').resize((img_size, img_size), Image.BICUBIC)
        label = load(dict(info, seg_fields=[]))['gt_seg_map']
        label = Image.fromarray(label.astype(np.uint8)).resize((img_size, img_size), Image.NEAREST)
        images.append(np.asarray(image))
        labels.append(np.asarray(label))
    return LabeledSplit(torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float(),
                        torch.from_numpy(np.stack(labels).astype(np.int64)), len(dataset.metainfo['classes']),
                        dataset.data_prefix.get('img_path', ''))


def label_counts(dataset) -> np.ndarray:
    """Pixel count per class (K,) over every label map of an mmseg segmentation dataset, at the files' resolution,
    through mmseg's ``LoadAnnotations`` (ignored pixels not counted)."""
    from mmseg.datasets.transforms import LoadAnnotations
    load = LoadAnnotations()  # reduce_zero_label and label_map from the data info (the dataset's)
    k = len(dataset.metainfo['classes'])
    counts = np.zeros(k, np.int64)
    for i in range(len(dataset)):
        label = load(dict(dataset.get_data_info(i), seg_fields=[]))['gt_seg_map'].astype(np.int64)
        counts += np.bincount(label[label < k], minlength=k)[:k]
    return counts


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


# ------------------------------------------------------------------------------------------------------ features
def feature_module(model: nn.Module) -> nn.Module:
    """The module whose ``dense_features`` the probe calls: the model itself when it has one, else its backbone."""
    from mmengine.model import is_model_wrapper
    model = model.module if is_model_wrapper(model) else model
    if hasattr(model, 'dense_features'):
        return model
    backbone = getattr(model, 'backbone', None)
    if backbone is not None and hasattr(backbone, 'dense_features'):
        return backbone
    raise TypeError(f'{type(model).__name__} (backbone: {type(backbone).__name__}) has no dense_features(x, layers); '
                    'implement it on the model or its backbone (beit_mm.evaluation.probe module docstring) to probe it')


def probe_model(config: str, checkpoint: str | None = None, seed: int = 0) -> nn.Module:
    """``config``'s model in eval mode (``beit_mm.apis.build_from_config``: no ``Pretrained`` file read) with random
    weights drawn after ``torch.manual_seed(seed)``, then, when ``checkpoint`` (a file or a work dir) is given, its
    weights: a checkpoint of the config's own model through ``beit_mm.apis.load_model``; any other file holding the
    probed backbone (a MIM checkpoint for a segmentation config, a ``tools/convert_checkpoint.py`` output) through
    the backbone's ``init_cfg=dict(type='Pretrained', ...)`` loader, which checks for missing weights and adapts
    them (prefix ``backbone.`` detected; BEiT's shared relative position bias copied into every block)."""
    from mmengine.config import Config

    from beit_mm.apis import build_from_config, load_model, resolve_checkpoint
    from beit_mm.fileio import load_state_dict_file
    cfg = Config.fromfile(config)
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    if checkpoint is None:
        return model
    path = resolve_checkpoint(checkpoint)
    target = feature_module(model)
    if target is model:  # the model itself is probed (e.g. beit_mm.DVAE): its own checkpoint, every weight
        return load_model(config, path, need=('', ))[0]
    state = load_state_dict_file(path)
    if {f'backbone.{k}' for k in target.state_dict()} <= set(state):  # a checkpoint of this config's model
        return load_model(config, path)[0]
    prefix = 'backbone.' if any(k.startswith('backbone.') for k in state) else None
    target.init_cfg = dict(type='Pretrained', checkpoint=path, prefix=prefix)
    target.init_weights()
    return model.eval()


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
    """Frozen patch features of ``images`` (N, 3, S, S) RGB 0..255: (N, C, h, w) on the CPU, the ``layers``'
    maps brought to the last layer's grid (average pooling when larger, bilinear when smaller) and concatenated.
    The model runs in eval mode, fp32, on its own device; its train/eval mode is restored afterwards."""
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


# ------------------------------------------------------------------------------------------------- classifiers
def standardize(train: Tensor, *others: Tensor) -> list[Tensor]:
    """Subtract the training features' mean and divide by their std (+1e-6), per feature: (N, C) each."""
    mu, sigma = train.mean(0), train.std(0) + 1e-6
    return [(t - mu) / sigma for t in (train, *others)]


def fit_linear_probe(x: Tensor, y: Tensor, num_classes: int, steps: int = PROBE_STEPS,
                     weight_decay: float = PROBE_WEIGHT_DECAY) -> nn.Linear:
    """Multinomial logistic regression (N, C) -> K classes, from zero weights by full-batch L-BFGS (strong Wolfe
    line search) on mean cross-entropy + weight_decay / 2 * |W|^2. Deterministic."""
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
    """mIoU / mAcc / aAcc (percent) of predicted vs target labels (any shape; target 255 ignored), with mmseg's
    ``IoUMetric`` (classes with neither pixels nor predictions are left out of the means)."""
    from mmseg.evaluation.metrics import IoUMetric
    areas = IoUMetric.intersect_and_union(pred.flatten(), target.flatten(), num_classes, IGNORE_INDEX)
    metrics = IoUMetric.total_area_to_metrics(*areas, metrics=['mIoU'])
    return dict(mIoU=100 * float(np.nanmean(metrics['IoU'])), mAcc=100 * float(np.nanmean(metrics['Acc'])),
                aAcc=100 * float(metrics['aAcc']))


def majority_metrics(train_counts: np.ndarray, val_counts: np.ndarray) -> dict[str, float]:
    """mIoU / mAcc / aAcc (percent) of predicting the most frequent training class everywhere, from per-class
    counts (K,) of the training and validation labels (pixels or patches), with mmseg's ``IoUMetric`` formulas;
    also ``majority_class``."""
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


# ----------------------------------------------------------------------------------------------- dense probe
class DenseProbe:
    """The dense probe of one labeled set (module docstring): the data are loaded once, :meth:`evaluate` scores any
    model on them.

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
        """The probe of an ADE20K-layout root: the first ``num_train`` training and ``num_val`` validation images
        (all when None) in file-name order, raw ids 1..``num_classes`` as classes."""
        splits = [load_seg_split(build_seg_dataset(ade20k_dataset_cfg(
            data_root, split, num_classes, img_suffix, seg_map_suffix, limit)), img_size)
            for split, limit in (('training', num_train), ('validation', num_val))]
        return cls(*splits, **kwargs)

    def patches(self, features: Tensor, split: LabeledSplit) -> tuple[Tensor, Tensor]:
        """Labeled patches of a split: features (M, C) and labels (M,) of the patches with a label."""
        labels = patch_labels(split.labels, tuple(features.shape[-2:]), self.num_classes).flatten()
        features = features.permute(0, 2, 3, 1).flatten(0, 2)
        keep = labels != IGNORE_INDEX
        return features[keep], labels[keep]

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Probe ``model``: ``probe_mIoU``, ``probe_mAcc``, ``probe_aAcc`` (linear probe), ``knn_acc``,
        ``knn_mIoU`` (k-NN) and ``majority_mIoU``, ``majority_mAcc``, ``majority_aAcc`` (most frequent training
        patch label), all in percent, on the validation patches; ``num_train_patches``, ``num_val_patches``."""
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


# ------------------------------------------------------------------------------------------ classification probe
def load_image_folder(root: str, split: str, img_size: int, per_class: int | None = None
                      ) -> tuple[Tensor, Tensor, list[str]]:
    """An ImageNet-layout split ``root/<split>/<class>/<image>`` through mmpretrain's ``CustomDataset`` (classes =
    sorted folder names): images (N, 3, S, S) RGB 0..255 (bicubic), labels (N,), class names; the first
    ``per_class`` images of each class in file-name order when given."""
    from mmpretrain.datasets import CustomDataset
    folder = osp.join(root, split)
    if not osp.isdir(folder) or not any(osp.isdir(osp.join(folder, d)) for d in os.listdir(folder)):
        raise LabeledDataError(f'0 class folders in {folder}; {describe_files(folder)}. Fix: give an ImageNet-layout '
                               'root (train/<class>/<image>, val/<class>/<image>)')
    dataset = CustomDataset(data_root=root, data_prefix=split, with_label=True, pipeline=[], serialize_data=False)
    if not len(dataset):
        raise LabeledDataError(f'0 images matched {", ".join("*" + e for e in dataset.extensions)} in {folder}; '
                               f'{describe_files(folder)}')
    taken: Counter = Counter()
    images, labels = [], []
    for i in range(len(dataset)):
        info = dataset.get_data_info(i)
        label = int(info['gt_label'])
        if per_class is not None and taken[label] >= per_class:
            continue
        taken[label] += 1
        images.append(np.asarray(open_image(info['img_path']).convert('RGB').resize((img_size, img_size),
                                                                                     Image.BICUBIC)))
        labels.append(label)
    return (torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float(), torch.tensor(labels),
            list(dataset.metainfo['classes']))


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
