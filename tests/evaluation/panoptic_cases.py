"""Crafted panoptic cases drawn as character grids, and their COCO panoptic format (PNG + JSON) for panopticapi.
Ground-truth legend ``char -> (segment id, label, iscrowd)``, prediction legend ``char -> label + instance x 1000``
('.' void); classes person, car (things), sky, grass (stuff); category id = label + 1."""
from __future__ import annotations

import json
import os
import os.path as osp

import numpy as np
import torch
from mmdet.evaluation.functional import INSTANCE_OFFSET
from PIL import Image

from beit_mm.data.datasets.coco_panoptic import id2rgb

META = dict(classes=('person', 'car', 'sky', 'grass'), thing_classes=('person', 'car'), stuff_classes=('sky', 'grass'))
PERSON, CAR, SKY, GRASS = range(4)
VOID = len(META['classes'])  # mmdet's predicted void: the number of classes


def P(label: int, instance: int = 0) -> int:
    return label + instance * INSTANCE_OFFSET


# Ground truth, listed in this order: s sky (10), g grass (11), p q r persons (1, 2, 3), c car (4), C D person crowds
# (20, 21), K car crowd (22).
GT = {'.': None, 's': (10, SKY, 0), 'g': (11, GRASS, 0), 'p': (1, PERSON, 0), 'q': (2, PERSON, 0),
      'r': (3, PERSON, 0), 'c': (4, CAR, 0), 'C': (20, PERSON, 1), 'D': (21, PERSON, 1), 'K': (22, CAR, 1)}
# Predictions: s sky, g grass, A B E F G person instances, k m n car instances.
PRED = {'.': VOID, 's': P(SKY), 'g': P(GRASS), 'A': P(PERSON, 1), 'B': P(PERSON, 2), 'E': P(PERSON, 3),
        'F': P(PERSON, 4), 'G': P(PERSON, 7), 'k': P(CAR, 5), 'm': P(CAR, 6), 'n': P(CAR, 8)}

CASES = {
    # A person predicted on a person crowd (6 of 6 pixels): forgiven; the sky prediction reaching onto the crowd keeps
    # those 2 pixels in its union (IoU 10/12).
    'crowd_same_class': (['ssssssss',
                          'sCCCCppp',
                          'sCCCCppp',
                          'gggggggg'],
                         ['ssssssss',
                          'sAAAsBBB',
                          'sAAAsBBB',
                          'gggggggg']),
    # A car predicted on a person crowd: a car false positive (only a car crowd would forgive it).
    'crowd_other_class': (['ssssssss',
                           'sCCCCppp',
                           'sCCCCppp',
                           'gggggggg'],
                          ['ssssssss',
                           'skkkkAAA',
                           'skkkkAAA',
                           'gggggggg']),
    # A person matched to its ground truth reaches 4 pixels onto a person crowd: IoU 8/12, not 8/8.
    'matched_over_crowd': (['ssssssss',
                            'sCCCpppp',
                            'sCCCpppp',
                            'gggggggg'],
                           ['ssssssss',
                            'ssAAAAAA',
                            'ssAAAAAA',
                            'gggggggg']),
    # Two person crowds, C listed before D: only D (the last) forgives, so A on C is a false positive.
    'two_crowds_one_class': (['ssssssss',
                              'CCCCDDDD',
                              'CCCCDDDD',
                              'pppppppp'],
                             ['ssssssss',
                              'AAAA....',
                              'AAAA....',
                              'EEEEEEEE']),
    # Void at and around half of a prediction: A 2 of 4 void (FP), B 3 of 5 (forgiven), E 2 of 5 (FP); F 1 void + 2
    # person crowd of 4 (forgiven); k 1 void + 1 person crowd of 3 (car: FP), m 2 void + 1 car crowd of 4 (forgiven);
    # grass reaches 2 pixels onto the car crowd (IoU 18/20); G and n are matched, so each false positive counts.
    'void_around_half': (['ssssssssssss',
                          '............',
                          'CCCKKKgggggg',
                          'gggggggggggg',
                          'pppppppccccc'],
                         ['AABBEEEFkmss',
                          'AABBBEEFkmm.',
                          'FFkmgggggggg',
                          'gggggggggggg',
                          'GGGGGGGnnnnn']),
    # IoU exactly 0.5 (A: 4 / 8; no match: a FN and a FP) and just above (B: 4 / 7); E: 2 / (6 + 2 - 2 - 2 void) = 0.5.
    'iou_at_half': (['ppppssss',
                     'qqqqssss',
                     'rr..ssss'],
                    ['AAAAAAAA',
                     'BBBBBBBs',
                     'EEEEEEss']),
    # No stuff anywhere: the stuff split has no counted category (not available, not 0).
    'no_stuff': (['pppp....',
                  'pppp..qq'],
                 ['AAAA....',
                  'AAAA.BBB']),
}


def ground_truth(name: str) -> tuple[np.ndarray, list[dict]]:
    """A case's segment-id map (H, W) and COCO ``segments_info`` (``id``, ``category_id``, ``iscrowd``, ``area``), in
    legend order (the crowd order matters)."""
    ids = np.array([[GT[char][0] if GT[char] else 0 for char in row] for row in CASES[name][0]], np.int64)
    return ids, [dict(id=i, category_id=label + 1, iscrowd=crowd, area=int((ids == i).sum()))
                 for i, label, crowd in filter(None, GT.values()) if (ids == i).any()]


def prediction(name: str) -> np.ndarray:
    """A case's prediction (H, W) int64 in mmdet's encoding."""
    return np.array([[PRED[char] for char in row] for row in CASES[name][1]], np.int64)


def mmdet_sample(name: str, png: str) -> dict:
    """A case as mmdet's packed data sample (``segments_info`` as ``CocoPanopticDataset`` gives it: contiguous
    ``category``, ``is_thing`` False for a crowd), the ground-truth PNG written to ``png``."""
    ids, info = ground_truth(name)
    Image.fromarray(id2rgb(ids)).save(png)
    segments = [dict(id=s['id'], category=s['category_id'] - 1,
                     is_thing=s['category_id'] - 1 in (PERSON, CAR) and not s['iscrowd']) for s in info]
    return dict(img_path=png.replace('.png', '.jpg'), seg_map_path=png, segments_info=segments,
                pred_panoptic_seg=dict(sem_seg=torch.from_numpy(prediction(name))[None]))


def write_coco(root: str, images: dict[str, tuple[np.ndarray, list[dict], np.ndarray]], classes: list[str],
               num_things: int) -> tuple[str, str]:
    """COCO panoptic ground truth and predictions under ``root`` for panopticapi's ``pq_compute``.

    Args:
        images: name -> (segment-id map, COCO ``segments_info``, prediction in mmdet's encoding).
        classes: the class names, the first ``num_things`` things; category id = label + 1.

    Returns:
        The ground-truth and prediction JSON paths (their PNG folders beside them, same stem).
    """
    categories = [dict(id=i + 1, name=n, isthing=int(i < num_things)) for i, n in enumerate(classes)]
    gt, pred = dict(images=[], annotations=[], categories=categories), dict(annotations=[])
    for folder in ('gt', 'pred'):
        os.makedirs(osp.join(root, folder), exist_ok=True)
    for image_id, (name, (ids, info, panoptic)) in enumerate(images.items(), start=1):
        file_name = f'{name}.png'
        Image.fromarray(id2rgb(ids)).save(osp.join(root, 'gt', file_name))
        gt['images'].append(dict(id=image_id, file_name=f'{name}.jpg', height=ids.shape[0], width=ids.shape[1]))
        gt['annotations'].append(dict(image_id=image_id, file_name=file_name, segments_info=info))
        values = [v for v in np.unique(panoptic).tolist() if v % INSTANCE_OFFSET < len(classes)]
        pred_ids = np.zeros_like(panoptic)
        for segment_id, value in enumerate(values, start=1):
            pred_ids[panoptic == value] = segment_id
        Image.fromarray(id2rgb(pred_ids)).save(osp.join(root, 'pred', file_name))
        pred['annotations'].append(dict(image_id=image_id, file_name=file_name, segments_info=[
            dict(id=i, category_id=v % INSTANCE_OFFSET + 1) for i, v in enumerate(values, start=1)]))
    for name, content in (('gt', gt), ('pred', pred)):
        with open(osp.join(root, f'{name}.json'), 'w') as f:
            json.dump(content, f)
    return osp.join(root, 'gt.json'), osp.join(root, 'pred.json')
