"""Labeled image sets for the frozen-feature probes, loaded through mmseg's and mmpretrain's datasets."""
from __future__ import annotations

import os
import os.path as osp
from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from ...fileio.inputs import open_image


class LabeledDataError(FileNotFoundError):
    """A labeled or image root has no (or unpaired) files of the expected suffix."""


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
    """The mmseg ``ADE20KDataset`` config of one split of an ADE20K-layout root, raw ids 1..K as the classes and at
    most its first ``limit`` images."""
    from mmseg.datasets import ADE20KDataset
    names = ADE20KDataset.METAINFO['classes']
    if not 1 <= num_classes <= len(names):
        raise ValueError(f'num_classes={num_classes}: the ADE20K layout has class ids 1..{len(names)}')
    return dict(type='ADE20KDataset', data_root=data_root,
                data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}'),
                img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, reduce_zero_label=True,
                metainfo=dict(classes=tuple(names[:num_classes])), indices=limit)


def build_seg_dataset(dataset_cfg: dict):
    """Build an mmseg segmentation dataset without a pipeline, after checking that its images and annotations pair.

    Raises:
        LabeledDataError: no images of the suffix, or an image without its annotation.
    """
    import mmseg.datasets  # noqa: F401  (registers the dataset classes)
    from mmseg.registry import DATASETS
    cfg = dict(dataset_cfg, pipeline=[], serialize_data=False, lazy_init=True)
    cfg.pop('test_mode', None)
    with DATASETS.switch_scope_and_registry('mmseg') as registry:
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
    load = LoadAnnotations()
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
    """Pixel count per class (K,) over every label map of an mmseg segmentation dataset (ignored pixels not counted)."""
    from mmseg.datasets.transforms import LoadAnnotations
    load = LoadAnnotations()
    k = len(dataset.metainfo['classes'])
    counts = np.zeros(k, np.int64)
    for i in range(len(dataset)):
        label = load(dict(dataset.get_data_info(i), seg_fields=[]))['gt_seg_map'].astype(np.int64)
        counts += np.bincount(label[label < k], minlength=k)[:k]
    return counts


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


def ade20k_splits(data_root: str, num_classes: int, img_size: int, num_train: int | None = None,
                  num_val: int | None = None, img_suffix: str = '.jpg',
                  seg_map_suffix: str = '.png') -> tuple[LabeledSplit, LabeledSplit]:
    """The training and validation splits of an ADE20K-layout root: the first ``num_train`` / ``num_val`` images
    (all when None) in file-name order, raw ids 1..``num_classes`` as classes."""
    return tuple(load_seg_split(build_seg_dataset(ade20k_dataset_cfg(
        data_root, split, num_classes, img_suffix, seg_map_suffix, limit)), img_size)
        for split, limit in (('training', num_train), ('validation', num_val)))
