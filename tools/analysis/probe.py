"""Probe the frozen features of any checkpoint: is this backbone any good for segmentation (and classification)?

    python tools/analysis/probe.py CONFIG CHECKPOINT --labeled-root ROOT --num-classes K [--num-labeled N]
        [--num-val N] [--layers 3 5 7 11] [--img-size S] [--img-suffix .jpg] [--seg-map-suffix .png]
        [--imagenet-root ROOT [--per-class N]] [--seed 0] [--out probe.json]

CONFIG is any beit_mm config whose model has a probe-able backbone (a segmentation, classification or MIM
pretraining config; ``beit_mm.DVAE`` too); CHECKPOINT a ``.pth`` or a ``tools/train.py`` work dir: a checkpoint of
the config's own model, or any file with its backbone's weights (a MIM checkpoint probed with a segmentation config,
a ``tools/convert_checkpoint.py`` output of official weights); ``beit_mm.models.builder.load_for_features`` loads it.

Dense probe (``--labeled-root``, an ADE20K-layout root with raw ids 1..K; ``beit_mm.evaluation.probe``): a linear
probe and a k-NN classifier of each patch's majority label on the frozen patch features of ``--layers`` (default: the
blocks a segmentor reads), fit on the first ``--num-labeled`` training images, scored on the validation patches; the
same for the config's model with random weights (seed ``--seed``) and for the majority class. Last line::

    probe mIoU X (random init Y, majority Z)

ImageNet-style classification (``--imagenet-root``, ``train/<class>/*`` and ``val/<class>/*``): k-NN (k 20, cosine,
temperature 0.07, as DINO's ``eval_knn.py``) and a linear probe on the grid-averaged features, top-1 in percent.
"""
from __future__ import annotations

import argparse
import json
import os



def default_img_size(cfg) -> int:
    """The config's ``crop_size`` (segmentation) or ``img_size`` (MIM study), else 224."""
    crop = cfg.get('crop_size')
    if crop is not None:
        return int(crop[0] if isinstance(crop, (tuple, list)) else crop)
    return int(cfg.get('img_size', 224))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='frozen-feature probes of a checkpoint vs random init and the '
                                     'majority class')
    parser.add_argument('config')
    parser.add_argument('checkpoint', help='a .pth file or a tools/train.py work dir')
    parser.add_argument('--labeled-root', help='ADE20K-layout root with raw labels 1..K (dense probe)')
    parser.add_argument('--num-classes', type=int, help='K: raw label ids 1..K are the classes')
    parser.add_argument('--num-labeled', type=int, default=None, help='fit on the first N training images (all)')
    parser.add_argument('--num-val', type=int, default=None, help='score on the first N validation images (all)')
    parser.add_argument('--layers', type=int, nargs='+', default=None,
                        help='blocks/levels to probe (default: the ones a segmentor of the backbone reads)')
    parser.add_argument('--img-size', type=int, default=None, help="image side (default: the config's crop_size)")
    parser.add_argument('--img-suffix', default='.jpg')
    parser.add_argument('--seg-map-suffix', default='.png')
    parser.add_argument('--imagenet-root', help='ImageNet-layout root (train/<class>/*, val/<class>/*)')
    parser.add_argument('--per-class', type=int, default=None, help='images per class and split (all)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the random-init model')
    parser.add_argument('--out', help='also write the numbers to this JSON file')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists (refused otherwise)')
    args = parser.parse_args()
    if not args.labeled_root and not args.imagenet_root:
        parser.error('give --labeled-root ROOT --num-classes K (dense probe) and/or --imagenet-root ROOT')
    if args.labeled_root and not args.num_classes:
        parser.error('--labeled-root needs --num-classes K')
    return args


def main() -> None:
    args = parse_args()
    from beit_mm.apis.checkpoint import CheckpointFileError, CheckpointMismatchError
    from beit_mm.fileio.names import refusal
    from beit_mm.data.datasets.labeled_sets import LabeledDataError
    from beit_mm.fileio.outputs import OutputError
    try:
        run(args)
    except (LabeledDataError, CheckpointFileError, CheckpointMismatchError, OutputError, FileNotFoundError) as e:
        raise refusal('probe.py', e) from None  # a wrong data root, checkpoint or output: the message says the fix


def run(args: argparse.Namespace) -> None:
    import torch

    from beit_mm.data.datasets.labeled_sets import load_image_folder
    from beit_mm.evaluation.probe import DenseProbe, classification_probe
    from beit_mm.models.builder import load_for_features
    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', torch.get_num_threads())))
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    MMLogger.get_instance('probe', log_level='WARNING')  # the models' per-parameter init reports stay quiet
    from beit_mm.apis import resolve_checkpoint
    from beit_mm.fileio.outputs import check_output
    if args.out:  # at start, not after minutes of probing; never into what the probe reads
        check_output(args.out, overwrite=args.overwrite,
                     inputs=[args.config, resolve_checkpoint(args.checkpoint), args.labeled_root, args.imagenet_root])
    cfg = Config.fromfile(args.config)
    model = load_for_features(args.config, args.checkpoint, args.seed)
    random_model = load_for_features(args.config, None, args.seed)
    size = args.img_size or default_img_size(cfg)
    results = {}
    last = None
    if args.imagenet_root:
        train = load_image_folder(args.imagenet_root, 'train', size, args.per_class)
        val = load_image_folder(args.imagenet_root, 'val', size, args.per_class)
        k = len(train[2])
        cls = {name: classification_probe(m, train[:2], val[:2], k, args.layers)
               for name, m in (('checkpoint', model), ('random_init', random_model))}
        results['classification'] = cls
        for name, r in cls.items():
            print(f'{name}: k-NN top-1 {r["knn_top1"]:.2f}, linear top-1 {r["linear_top1"]:.2f} '
                  f'({len(val[1])} validation images, {k} classes)')
        last = (f'probe top-1 {cls["checkpoint"]["linear_top1"]:.2f} k-NN {cls["checkpoint"]["knn_top1"]:.2f} '
                f'(random init {cls["random_init"]["linear_top1"]:.2f} k-NN {cls["random_init"]["knn_top1"]:.2f}, '
                f'majority {cls["checkpoint"]["majority_top1"]:.2f})')
    if args.labeled_root:
        probe = DenseProbe.from_root(args.labeled_root, args.num_classes, size, args.num_labeled, args.num_val,
                                     args.img_suffix, args.seg_map_suffix, layers=args.layers)
        dense = {name: probe.evaluate(m) for name, m in (('checkpoint', model), ('random_init', random_model))}
        results['dense'] = dense
        for name, r in dense.items():
            print(f'{name}: probe mIoU {r["probe_mIoU"]:.2f} mAcc {r["probe_mAcc"]:.2f} aAcc {r["probe_aAcc"]:.2f}, '
                  f'k-NN acc {r["knn_acc"]:.2f} mIoU {r["knn_mIoU"]:.2f} ({r["num_val_patches"]} validation patches)')
        r = dense['checkpoint']
        print(f'majority class: mIoU {r["majority_mIoU"]:.2f} mAcc {r["majority_mAcc"]:.2f} aAcc '
              f'{r["majority_aAcc"]:.2f}')
        last = (f'probe mIoU {r["probe_mIoU"]:.2f} (random init {dense["random_init"]["probe_mIoU"]:.2f}, '
                f'majority {r["majority_mIoU"]:.2f})')
    if args.out:
        from beit_mm.fileio.outputs import atomic_file
        with atomic_file(args.out) as tmp, open(tmp, 'w') as f:
            json.dump(dict(vars(args), img_size=size, results=results), f, indent=1)
    print(last)


if __name__ == '__main__':
    main()
