"""Write a synthetic demo dataset in a real dataset's layout.

    python tools/make_demo_data.py [--dataset ade20k] [--root data/ade_demo] [--num-train 200] [--num-val 40]
                                   [--size 128] [--seed 0]
    python tools/make_demo_data.py --dataset digits [--root data/digits] [--num-train 400] [--num-val 100]
                                   [--size 64] [--seed 0] [--no-annotations]
    python tools/make_demo_data.py --dataset digits-dark [--root data/digits_dark] ...
    python tools/make_demo_data.py --dataset imagenet [--root data/imagenet_demo] [--num-classes 5] [--size 64]
    python tools/make_demo_data.py --dataset shapes [--root data/shapes] [--num-train 300] [--num-val 300]
                                   [--size 64] [--seed 0] [--no-annotations]
    python tools/make_demo_data.py --layout custom [--root data/custom_demo] [--num-train 200] [--num-val 40]
                                   [--size 128] [--seed 0]
    python tools/make_demo_data.py --layout {coco-stuff164k,coco-stuff10k,pascal-context,cityscapes} [--root ...]
                                   [--num-train 200] [--num-val 40] [--size 128] [--seed 0]
    python tools/make_demo_data.py --layout coco [--root data/coco_demo] [--num-train 40] [--num-val 10]
                                   [--size 64] [--seed 0]
    python tools/make_demo_data.py --layout ade20k-panoptic [--root data/ade_panoptic_demo] [--num-train 40]
                                   [--num-val 10] [--size 64] [--seed 0]

``ade20k``: ``beit_mm.data.demo.ade20k.make_demo_ade20k`` (ADEChallengeData2016 layout, labels checked afterwards);
``shapes``: the same layout with ``style='shapes'`` (7 classes named by outline, not colour: the MIM study's data;
``--no-annotations`` writes an unlabeled image pool, e.g. ``--root data/shapes_unlabeled --num-train 3000 --num-val 0
--seed 1``);
``digits``: the same layout with ``style='digits'`` (scikit-learn's bundled UCI handwritten digits, four per image on a
noisy textured background, label = digit + 1 on ink, 0 elsewhere: 10 classes with reduce_zero_label; validation images
from glyphs training never uses; the MIM study's second dataset; the unlabeled pool: ``--root data/digits_unlabeled
--num-train 3000 --num-val 0 --seed 1 --no-annotations``);
``digits-dark``: the same digits in dark ink on light paper (``style='digits-dark'``, default root data/digits_dark;
the digits a from-scratch study model learns within the study's budget);
``imagenet``: ``beit_mm.data.demo.imagenet.make_demo_imagenet`` (ImageNet folder layout, wnid-named class folders).
``--layout custom``: ``beit_mm.data.demo.custom.make_demo_custom``, the ``ade20k`` demo's drawings with three of its
classes in the custom layout of ``beit_mm.CustomSegDataset`` (``classes.txt`` = sky, grass, car; ``palette.txt``;
``images/{train,val}/<random stem>.jpg|.png``, ``masks/{train,val}/<stem>.png`` with values 0..2 and 255 ignored).
``--layout coco-stuff164k|coco-stuff10k|pascal-context|cityscapes``: the same drawings in the exact layouts of
mmseg's ``COCOStuffDataset`` (``images/train2017``, ``annotations/train2017/<id>_labelTrainIds.png``; the 10k set's
``train2014``/``test2014`` with 0 = unlabeled), ``PascalContextDataset59`` (``JPEGImages``,
``SegmentationClassContext``, ``ImageSets/SegmentationContext/{train,val}.txt``) and ``CityscapesDataset``
(``leftImg8bit/<split>/<city>/*_leftImg8bit.png``, ``gtFine/<split>/<city>/*_gtFine_labelTrainIds.png``), for
``configs/_base_/datasets/{coco-stuff164k,coco-stuff10k,pascal_context_59,cityscapes}.py``
(:mod:`beit_mm.data.demo.coco_stuff`, :mod:`beit_mm.data.demo.pascal_context`, :mod:`beit_mm.data.demo.cityscapes`).
``--layout coco``: ``beit_mm.data.demo.coco.make_demo_coco``, COCO's panoptic and instance layout (things person, car;
stuff road, sky, grass): ``{train,val}2017/*.jpg``, ``annotations/panoptic_{train,val}2017.json`` and ``.../*.png``,
``annotations/instances_{train,val}2017.json``, for mmdet's ``CocoPanopticDataset`` and ``CocoDataset``.
``--layout ade20k-panoptic``: ``beit_mm.data.demo.ade20k_panoptic.make_demo_ade20k_panoptic``, the same drawings in
ADE20K's panoptic layout as the official EoMT reads it (``images/``, ``annotations/`` and ``annotations_instance/``,
each with ``training/`` and ``validation/``), for ``beit_mm.ADE20KPanopticDataset``.

The root must be new, an empty folder, or a demo root this tool wrote (``.beit_mm_demo.json`` and the journal
``.beit_mm_demo.files`` listing every file it wrote with its sha256): any other folder (a real dataset), a link, a
folder inside another dataset root, and a demo root holding anything its journal does not vouch for (images a user
added, a file edited since, a link at any depth) are refused before anything is written, with one line and exit code
2 (:mod:`beit_mm.data.demo.root`). Files are replaced and removed only when the journal lists them with their
content; each is written through a temporary file and a rename, so a killed run leaves no truncated image.
"""
import argparse

# --layout of mmseg's datasets: default root
LAYOUTS = {
    'coco-stuff164k': 'data/coco_stuff164k_demo',
    'coco-stuff10k': 'data/coco_stuff10k_demo',
    'pascal-context': 'data/pascal_context_demo',
    'cityscapes': 'data/cityscapes_demo',
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Write a synthetic demo dataset in a real dataset\'s layout')
    parser.add_argument('--dataset', choices=('ade20k', 'shapes', 'digits', 'digits-dark', 'imagenet'),
                        default='ade20k')
    parser.add_argument('--layout', choices=('ade20k', 'custom', 'coco', 'ade20k-panoptic') + tuple(LAYOUTS),
                        default='ade20k',
                        help='custom: the three-class demo in the layout of beit_mm.CustomSegDataset (classes.txt, '
                        'images/, masks/; default root data/custom_demo); coco: COCO panoptic + instance files '
                        '(default root data/coco_demo); ade20k-panoptic: semantic + instance PNGs (default root '
                        'data/ade_panoptic_demo); coco-stuff164k, coco-stuff10k, pascal-context, cityscapes: '
                        'the layouts of mmseg\'s datasets (default roots data/<name>_demo); only with --dataset ade20k')
    parser.add_argument('--root', default=None,
                        help='dataset root (default data/ade_demo, data/shapes, data/digits, data/digits_dark or '
                        'data/imagenet_demo)')
    parser.add_argument('--num-train', type=int, default=None,
                        help='training images (ade20k 200, shapes 300, digits 400) or per class (imagenet, 40)')
    parser.add_argument('--num-val', type=int, default=None,
                        help='validation images (ade20k 40, shapes 300, digits 100) or per class (imagenet, 10)')
    parser.add_argument('--no-annotations', action='store_true',
                        help='ade20k/shapes/digits(-dark): write the images only (an unlabeled pool)')
    parser.add_argument('--num-classes', type=int, default=5, help='imagenet: number of classes')
    parser.add_argument('--size', type=int, default=None, help='image side in pixels (default 128 / 64)')
    parser.add_argument('--seed', type=int, default=0, help='random seed')
    args = parser.parse_args()
    if args.layout != 'ade20k' and (args.dataset != 'ade20k' or args.no_annotations):
        parser.error(f'--layout {args.layout} writes a labeled set of its own: leave out --dataset and '
                     '--no-annotations')
    return args


def make(args: argparse.Namespace) -> None:
    """Write (or reuse) the demo set that ``args`` describe and print one summary line."""
    from beit_mm.data.demo.ade20k import check_ade20k_labels, make_demo_ade20k
    from beit_mm.data.demo.ade20k_panoptic import make_demo_ade20k_panoptic
    from beit_mm.data.demo.cityscapes import make_demo_cityscapes
    from beit_mm.data.demo.coco import COCO_DEMO_METAINFO, make_demo_coco
    from beit_mm.data.demo.coco_stuff import make_demo_coco_stuff10k, make_demo_coco_stuff164k
    from beit_mm.data.demo.custom import CUSTOM_DEMO_CLASSES, label_share, make_demo_custom
    from beit_mm.data.demo.imagenet import make_demo_imagenet
    from beit_mm.data.demo.pascal_context import make_demo_pascal_context
    if args.layout in LAYOUTS:
        make_layout = {'coco-stuff164k': make_demo_coco_stuff164k, 'coco-stuff10k': make_demo_coco_stuff10k,
                       'pascal-context': make_demo_pascal_context, 'cityscapes': make_demo_cityscapes}[args.layout]
        default_root = LAYOUTS[args.layout]
        num_train = 200 if args.num_train is None else args.num_train
        num_val = 40 if args.num_val is None else args.num_val
        root = make_layout(args.root or default_root, num_train, num_val, args.size or 128, args.seed)
        print(f'{root}: {args.layout} layout, {num_train} train + {num_val} val images')
        return
    if args.layout == 'custom':
        root = make_demo_custom(args.root or 'data/custom_demo', 200 if args.num_train is None else args.num_train,
                                40 if args.num_val is None else args.num_val, args.size or 128, args.seed)
        names = {value: name for value, (name, _, _) in CUSTOM_DEMO_CLASSES.items()}
        share = ', '.join(f'{value} {names.get(value, "ignored")}: {s:.1%}' for value, s in label_share(root).items())
        print(f'{root}: custom layout, classes {", ".join(names.values())}; label share {share}')
        return
    if args.layout == 'coco':
        root = make_demo_coco(args.root or 'data/coco_demo', 40 if args.num_train is None else args.num_train,
                              10 if args.num_val is None else args.num_val, args.size or 64, args.seed)
        print(f'{root}: COCO panoptic + instance layout, things {", ".join(COCO_DEMO_METAINFO["thing_classes"])}, '
              f'stuff {", ".join(COCO_DEMO_METAINFO["stuff_classes"])}')
        return
    if args.layout == 'ade20k-panoptic':
        root = make_demo_ade20k_panoptic(args.root or 'data/ade_panoptic_demo',
                                         40 if args.num_train is None else args.num_train,
                                         10 if args.num_val is None else args.num_val, args.size or 64, args.seed)
        print(f'{root}: ADE20K panoptic layout (semantic + instance PNGs), things person, car; stuff road, sky, '
              'grass')
        return
    if args.dataset == 'imagenet':
        root = make_demo_imagenet(args.root or 'data/imagenet_demo', num_classes=args.num_classes,
                                  per_class_train=args.num_train or 40, per_class_val=args.num_val or 10,
                                  size=args.size or 64, seed=args.seed)
        print(f'{root}: {args.num_classes} classes in ImageNet folder layout')
        return
    defaults = {'shapes': (300, 300, 64, 'data/shapes'), 'digits': (400, 100, 64, 'data/digits'),
                'digits-dark': (400, 100, 64, 'data/digits_dark'),
                'ade20k': (200, 40, 128, 'data/ade_demo')}[args.dataset]
    num_train = defaults[0] if args.num_train is None else args.num_train
    num_val = defaults[1] if args.num_val is None else args.num_val
    root = make_demo_ade20k(args.root or defaults[3], num_train, num_val, args.size or defaults[2], args.seed,
                            style='classes' if args.dataset == 'ade20k' else args.dataset,
                            with_annotations=not args.no_annotations)
    if args.no_annotations:
        print(f'{root}: {num_train} train + {num_val} val images, no annotations')
        return
    counts = check_ade20k_labels(root)
    total = sum(counts.values())
    share = ', '.join(f'{value}: {count / total:.1%}' for value, count in sorted(counts.items()))
    print(f'{root}: {num_train} train + {num_val} val images; label share {share}')


def main() -> None:
    args = parse_args()
    from beit_mm.fileio.names import refusal
    from beit_mm.data.demo.root import NotADemoRootError
    try:
        make(args)
    except NotADemoRootError as error:
        raise refusal('make_demo_data.py', error) from None


if __name__ == '__main__':
    main()
