"""The trivial baseline of a panoptic config's PQ: the training set's most frequent label at each position, predicted
for every test image without looking at it (``beit_mm.evaluation.panoptic_prior``), scored by the config's metric.

    python tools/analysis/panoptic_prior.py CONFIG [--grid 64] [--cfg-options k=v ...]

Prints mmdet's PQ table (all, things, stuff) and one line of the numbers.
"""
import argparse

from mmengine.config import DictAction


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='a panoptic config (its test metric beit_mm.PanopticQualityMetric)')
    parser.add_argument('--grid', type=int, default=64, help='the raster the prior is counted on (grid x grid)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config values (key=value)')
    args = parser.parse_args(argv)
    from beit_mm.fileio.names import refusal
    from beit_mm.apis.baselines import panoptic_prior_baseline
    try:
        metrics = panoptic_prior_baseline(args.config, args.cfg_options, args.grid)
    except ValueError as error:
        raise refusal('panoptic_prior.py', error) from None
    print('positional prior: ' + '  '.join(f'{k}: {v:.2f}' for k, v in metrics.items()))


if __name__ == '__main__':
    main()
