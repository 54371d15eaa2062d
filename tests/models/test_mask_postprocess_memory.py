"""Panoptic and instance post-processing at the original size choose the queries first and resize them a few at a
time: the same results as resizing every query's mask first (crafted logits, several chunk sizes), and a peak memory
that does not grow with the number of queries (measured in a fresh process, as tests/memory_probe.py does)."""
import os
import re
import subprocess
import sys

import pytest
import torch

from beit_mm.models.segmentors.mask_postprocess import (OriginalSize, instance_results, panoptic_segments,
                                                        to_original_size)

from ..conftest import ROOT
from ..support.mask_postprocess_probe import crafted_logits

PROBE = os.path.join(ROOT, 'tests', 'support', 'mask_postprocess_probe.py')


@pytest.mark.parametrize('chunk', [1, 3, 8, 1000])
def test_choosing_before_resizing_gives_the_same_results(chunk):
    """40 queries, 6 classes (3 things), mask logits 16 x 16 of a 64 x 64 input whose image is 64 x 40, shown at
    97 x 61: the panoptic map and the instance masks and labels equal those computed from every query's mask resized
    first, the instance scores to float32 rounding of their sums (so PQ and AP are the same)."""
    class_logits, mask_logits = crafted_logits(40, 6, (16, 16), seed=1)
    resize = OriginalSize((64, 64), (64, 40), (97, 61))
    full = to_original_size(mask_logits, (64, 64), (64, 40), (97, 61))
    ref = panoptic_segments(full, class_logits, 3)
    got = panoptic_segments(mask_logits, class_logits, 3, resize=resize, chunk=chunk)
    assert len(ref.unique()) > 3, 'the crafted logits give a few segments'
    torch.testing.assert_close(got, ref, rtol=0, atol=0)
    ref_masks, ref_labels, ref_scores = instance_results(full, class_logits, 30)
    masks, labels, scores = instance_results(mask_logits, class_logits, 30, resize=resize, chunk=chunk)
    assert torch.equal(masks, ref_masks) and torch.equal(labels, ref_labels)
    torch.testing.assert_close(scores, ref_scores, rtol=1e-6, atol=0)  # the mean's sum: threads split rows by size


def _peak(task: str, *extra: str) -> tuple[float, float]:
    proc = subprocess.run([sys.executable, PROBE, task, '1200', '600', '200', *extra], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = re.search(r'peak_rss_mib=(\d+) base_rss_mib=(\d+)', proc.stdout)
    return float(line[1]), float(line[2])


@pytest.mark.parametrize('task', ['panoptic', 'instance'])
def test_peak_memory_does_not_grow_with_the_queries(task):
    """One 1200 x 600 image, 200 queries: one query's mask there is 2.7 MiB in float32, all 200 of them 549 MiB. The
    post-processing adds less than a quarter of that (a few chunks of masks) to the peak of its inputs and output."""
    peak, base = _peak(task)
    print(f'{task}: peak {peak:.0f} MiB, {peak - base:.0f} MiB over the inputs and output')
    assert peak - base < 549 / 4, f'{task} post-processing took {peak - base:.0f} MiB over its inputs and output'
