"""The trivial baseline of a panoptic number (``beit_mm.evaluation.panoptic_prior``, ``tools/analysis/panoptic_prior.py``):
the positional prior counted on a hand-made split, its panoptic encoding (thing regions as separate instances), and
the tool on the generated COCO-layout demo through the config's own metric."""
import numpy as np
import pytest
from mmdet.evaluation.functional import INSTANCE_OFFSET

from beit_mm.data.demo.coco import make_demo_coco
from beit_mm.evaluation.panoptic_prior import VOID, positional_prior, prior_prediction

from ..conftest import ROOT, load_tool


class _Split:
    """A dataset's interface as the prior reads it: metainfo and data infos (COCO panoptic: ids + segments_info)."""

    def __init__(self, tmp_path, maps):
        from PIL import Image
        from beit_mm.data.datasets.coco_panoptic import id2rgb
        self.metainfo = dict(classes=('car', 'sky', 'road'), thing_classes=('car', ), stuff_classes=('sky', 'road'))
        self.infos = []
        for i, ids in enumerate(maps):
            path = str(tmp_path / f'{i}.png')
            Image.fromarray(id2rgb(ids)).save(path)
            self.infos.append(dict(seg_map_path=path, segments_info=[
                dict(id=1, category=1, is_thing=False), dict(id=2, category=2, is_thing=False),
                dict(id=3, category=0, is_thing=True), dict(id=4, category=0, is_thing=False)]))  # 4: a crowd

    def __len__(self):
        return len(self.infos)

    def get_data_info(self, index):
        return self.infos[index]


def test_prior_is_the_most_frequent_label_at_each_position(tmp_path):
    a = np.array([[1, 1], [2, 3]])  # sky over road and a car
    b = np.array([[1, 1], [2, 2]])
    c = np.array([[1, 0], [4, 2]])  # void and a crowd car: void
    prior = positional_prior(_Split(tmp_path, [a, b, c]), grid=2)
    np.testing.assert_array_equal(prior, [[1, 1], [2, 2]])
    prior = positional_prior(_Split(tmp_path, [c, c, a]), grid=2)
    np.testing.assert_array_equal(prior, [[1, VOID], [VOID, 2]])


def test_prior_prediction_makes_each_thing_region_an_instance():
    prior = np.array([[1, 0, 1, 0],
                      [VOID, 0, 2, 2]], np.uint8)
    out = prior_prediction(prior, 2, 4, things={0}, num_classes=3)
    want = np.array([[1, 1 * INSTANCE_OFFSET, 1, 2 * INSTANCE_OFFSET],
                     [3, 1 * INSTANCE_OFFSET, 2, 2]])
    np.testing.assert_array_equal(out, want)


def test_tool_scores_the_prior_with_the_configs_metric(tmp_path, capsys):
    root = make_demo_coco(str(tmp_path / 'coco'), 6, 3, 32, seed=0)
    tool = load_tool('tools/analysis/panoptic_prior.py')
    config = f'{ROOT}/configs/demo/eomt_beit-tiny-p8_1xb8-0.3k_coco-panoptic-demo-64x64.py'
    options = [f'{k}.dataset.data_root={root}' for k in ('train_dataloader', 'test_dataloader')]
    tool.main([config, '--grid', '16', '--cfg-options', *options])
    out = capsys.readouterr().out  # (the metric's table goes to the current MMEngine logger)
    assert 'positional prior: PQ: ' in out and 'PQ_st: ' in out
    assert 'PQ_th: 0.00' in out  # no thing is the majority anywhere: no instance predicted
    with pytest.raises(SystemExit, match='not beit_mm.PanopticQualityMetric'):
        tool.main([f'{ROOT}/configs/demo/eomt_beit-tiny-p8_1xb8-1k_ade20k-demo-64x64.py'])  # semantic: IoUMetric
