"""Scan a segmentation config's datasets for bad input before training (every pair decoded, with a progress bar).

    python tools/analysis/check_dataset.py CONFIG [--splits train val] [--num-samples N] [--cfg-options k=v ...]

Checks (``beit_mm.data.checks``): images without annotations and the reverse, unreadable or truncated files,
image/annotation size mismatches (sizes as mmcv's loader returns the image, after its EXIF orientation tag), EXIF tags
that turn an image to another size than its annotation or turn a square image, annotations holding JPEG data, colour
masks, label values outside the classes and the ignore index after ``reduce_zero_label``, 0/255 masks, masks reduced
twice, an empty split, two images sharing one annotation (one stem, two suffixes); for ``beit_mm.CustomSegDataset``
also its ``classes.txt`` (missing, empty, blank lines, duplicate names) and ``palette.txt``; and the config's heads
against the training set's class count (``decode_head`` and ``auxiliary_head`` ``num_classes``). Prints one line per
problem (files, count, fix) and exits with status 1, or prints ``OK``; 255 beside raw class values that may mark void
pixels gives a warning. Training runs the same check on a sample at start
(``beit_mm.SegDatasetCheckHook``); this tool decodes everything (``--num-samples`` to sample instead).
"""
import argparse
import os.path as osp
import sys

from mmengine.config import Config, DictAction
from mmengine.utils import ProgressBar

SPLITS = {'train': 'train_dataloader', 'val': 'val_dataloader', 'test': 'test_dataloader'}


def progress_bar(indices):
    """Iterate ``indices`` while drawing mmengine's ProgressBar."""
    bar = ProgressBar(len(indices))
    for i in indices:
        yield i
        bar.update()
    sys.stdout.write('\n')


def build_dataset(cfg: Config, loader: str):
    """The dataset of ``cfg[loader]``, built with the config's registry scope; FileNotFoundError for a missing
    folder is re-raised with the fix."""
    from mmseg.registry import DATASETS

    from beit_mm.data.checks import DatasetCheckError
    from beit_mm.fileio.names import one_line, shown
    dataset_cfg = cfg[loader].dataset
    try:
        return DATASETS.build(dataset_cfg)
    except FileNotFoundError as error:
        raise DatasetCheckError(f'[{loader}] {one_line(str(error))}. Fix: check data_root '
                                f'({shown(str(dataset_cfg.get("data_root")))}) and data_prefix '
                                f'({dict(dataset_cfg.get("data_prefix", {}))}); for the demo data run python '
                                'tools/make_demo_data.py') from None


def main() -> int:
    parser = argparse.ArgumentParser(description='Check the datasets of a segmentation config')
    parser.add_argument('config')
    parser.add_argument('--splits', nargs='+', choices=sorted(SPLITS), default=['train', 'val'])
    parser.add_argument('--num-samples', type=int, default=None,
                        help='decode this many evenly spread pairs per split (default: all)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings, key=value')
    args = parser.parse_args()
    from mmengine.registry import init_default_scope

    from beit_mm.data.checks import (DatasetCheckError, check_seg_dataset, check_split_folders, config_head_classes,
                                     head_classes_problem)
    from beit_mm.fileio.names import one_line, shown
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    failed = []
    for split in args.splits:
        if cfg.get(SPLITS[split]) is None:
            continue
        try:
            check_split_folders(cfg, [SPLITS[split]])
            dataset = build_dataset(cfg, SPLITS[split])
            print(f'{split}: {len(dataset)} images under {shown(osp.dirname(dataset.data_prefix.get("img_path", "")))}')
            if split == 'train' and cfg.get('model') and 'classes' in dataset.metainfo:
                problem = head_classes_problem(config_head_classes(cfg.model), len(dataset.metainfo['classes']),
                                               getattr(dataset, 'classes_path', None))
                if problem is not None:
                    failed.append(problem)
            check_seg_dataset(dataset, split, args.num_samples, progress=progress_bar)
        except DatasetCheckError as error:
            failed.append(str(error))
    if failed:
        print('\n'.join(one_line(line) for message in failed for line in message.splitlines()))  # no line forged
        return 1
    print('OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
