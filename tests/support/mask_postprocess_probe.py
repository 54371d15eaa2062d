"""Test helper: crafted EoMT logits for one image, and (run as a script) the peak RSS of its panoptic or instance
post-processing at the original size in a fresh process.

    python tests/support/mask_postprocess_probe.py TASK H W QUERIES [--all-first]

prints ``mask-postprocess task=... peak_rss_mib=... base_rss_mib=...``: the peak over the whole process and the peak
before post-processing (imports and inputs). ``--all-first`` resizes every query's mask before choosing any."""
import argparse
import resource

import torch
import torch.nn.functional as F

INPUT = 640  # the padded input side; mask logits at INPUT / 4


def crafted_logits(num_queries: int, num_classes: int, grid: tuple[int, int], seed: int = 0):
    """Class logits (Q, C + 1), about a third of the queries confident (kept at mask_thresh 0.8), and mask logits
    (Q, h, w): each query a region of a random 4 x 4 partition (+3 inside, -3 outside) plus noise, so that masks
    overlap and compete for pixels."""
    gen = torch.Generator().manual_seed(seed)
    class_logits = torch.randn(num_queries, num_classes + 1, generator=gen)
    confident = torch.rand(num_queries, generator=gen) < 0.35
    labels = torch.randint(0, num_classes + 1, (num_queries, ), generator=gen)
    class_logits[confident, labels[confident]] += 8.0
    regions = torch.randint(0, num_queries, (1, 1, 4, 4), generator=gen).float()
    regions = F.interpolate(regions, grid, mode='nearest')[0]
    inside = regions == torch.arange(num_queries).view(num_queries, 1, 1)
    mask_logits = torch.where(inside, 3.0, -3.0) + 3.5 * torch.randn(num_queries, *grid, generator=gen)
    return class_logits, mask_logits


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    from beit_mm.models.segmentors.mask_postprocess import (OriginalSize, instance_results, panoptic_segments,
                                                            to_original_size)
    parser = argparse.ArgumentParser()
    parser.add_argument('task', choices=['panoptic', 'instance'])
    parser.add_argument('height', type=int)
    parser.add_argument('width', type=int)
    parser.add_argument('queries', type=int)
    parser.add_argument('--all-first', action='store_true')
    args = parser.parse_args()
    torch.set_num_threads(1)
    class_logits, mask_logits = crafted_logits(args.queries, 133, (INPUT // 4, INPUT // 4))
    ori = (args.height, args.width)
    scale = INPUT / max(ori)
    resize = OriginalSize((INPUT, INPUT), (round(ori[0] * scale), round(ori[1] * scale)), ori)
    # the output itself, allocated and touched before the base is taken: a panoptic map or the instance masks
    out = torch.zeros(ori, dtype=torch.int64) if args.task == 'panoptic' else torch.ones(100, *ori, dtype=torch.bool)
    base = rss_mib()
    del out
    with torch.no_grad():
        if args.all_first:
            full = to_original_size(mask_logits, resize.input_size, resize.img_shape, ori)
            result = (panoptic_segments(full, class_logits, 80) if args.task == 'panoptic' else
                      instance_results(full, class_logits, 100))
        else:
            result = (panoptic_segments(mask_logits, class_logits, 80, resize=resize) if args.task == 'panoptic' else
                      instance_results(mask_logits, class_logits, 100, resize=resize))
    del result
    print(f'mask-postprocess task={args.task} size={args.height}x{args.width} queries={args.queries} '
          f'all_first={args.all_first} peak_rss_mib={rss_mib():.0f} base_rss_mib={base:.0f}', flush=True)


if __name__ == '__main__':
    main()
