"""The cheaper ADE20K train pipeline (``HistogramRandomCrop``, ``SamplePhotoMetricDistortion`` + the distortion in
``PhotoMetricSegDataPreProcessor``) against mmseg 1.2's ``RandomCrop`` and ``PhotoMetricDistortion``: the same crops,
flip, RNG state and distorted crop uint8 for uint8 for the same seed."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from mmcv.transforms import Compose
from mmengine.structures import PixelData
from mmseg.models.data_preprocessor import SegDataPreProcessor
from mmseg.structures import SegDataSample
from PIL import Image

from beit_mm.data.demo.photos import photo_like_image
from beit_mm.data.transforms.photometric import (SamplePhotoMetricDistortion, bgr_to_hsv, hsv_to_bgr,
                                                 photometric_distortion)
from beit_mm.data.transforms.seg_crop import HistogramRandomCrop
from beit_mm.models.segmentors import PhotoMetricSegDataPreProcessor

CROP = (64, 64)
SCALE = (256, 64)  # RandomResize: 0.5-2x of a 64 px short side; crops smaller than CROP happen (the tail columns)
SEEDS = 50


def head(crop: str) -> list:
    return [dict(type='LoadImageFromFile'), dict(type='mmseg.LoadAnnotations', reduce_zero_label=True),
            dict(type='mmseg.RandomResize', scale=SCALE, ratio_range=(0.5, 2.0), keep_ratio=True),
            dict(type=crop, crop_size=CROP, cat_max_ratio=0.75), dict(type='mmseg.RandomFlip', prob=0.5)]


EXACT = Compose(head('mmseg.RandomCrop') + [dict(type='mmseg.PhotoMetricDistortion')])
NEW = Compose(head('beit_mm.HistogramRandomCrop') + [dict(type='beit_mm.SamplePhotoMetricDistortion')])


@pytest.fixture(scope='module')
def samples(tmp_path_factory) -> list[dict]:
    """Photo-like JPEGs (q90) of 4 shapes with label maps of 8 x 8 px blocks, labels 0..5 (0 -> 255 ignored)."""
    folder = tmp_path_factory.mktemp('ade')
    rng = np.random.default_rng(0)
    found = []
    for i, (h, w) in enumerate([(120, 160), (160, 120), (96, 96), (200, 150)]):
        img, seg = str(folder / f'{i}.jpg'), str(folder / f'{i}.png')
        Image.fromarray(photo_like_image(h, w, rng)).save(img, quality=90)
        blocks = rng.integers(0, 6, (h // 8 + 1, w // 8 + 1), dtype=np.uint8)
        blocks[: h // 16] = 3  # one large region: the category check rejects some crops
        Image.fromarray(np.kron(blocks, np.ones((8, 8), np.uint8))[:h, :w]).save(seg)
        found.append(dict(img_path=img, seg_map_path=seg, reduce_zero_label=True, seg_fields=[]))
    return found


def run(pipeline: Compose, sample: dict, seed: int) -> tuple[dict, tuple]:
    np.random.seed(seed)
    out = pipeline(dict(sample, seg_fields=[]))
    return out, np.random.get_state()[1:3]


def as_tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))


@pytest.mark.parametrize('backend', ['torch', 'opencv'])
def test_same_seed_same_crop_flip_draws_and_distorted_crop(samples, backend):
    """50 seeds x 4 images: the label crop and the flip equal, the RNG state after the pipeline equal, and the
    exact pipeline's distorted crop equal to the preprocessor's distortion of the new pipeline's crop with its drawn
    parameters, uint8 for uint8: on tensors (OpenCV's HSV round trips reproduced, also the tail columns of crops
    narrower than 64) and with OpenCV (what the preprocessor does on the CPU)."""
    widths, ops, checked = set(), set(), 0
    for sample in samples:
        for seed in range(SEEDS):
            (a, state_a), (b, state_b) = run(EXACT, sample, seed), run(NEW, sample, seed)
            assert np.array_equal(a['gt_seg_map'], b['gt_seg_map']), (sample['img_path'], seed)
            assert a['flip'] == b['flip'] and a['img_shape'] == b['img_shape'] and a['scale'] == b['scale']
            assert all(np.array_equal(x, y) for x, y in zip(state_a, state_b)), 'a different number of draws'
            params = b[SamplePhotoMetricDistortion.key]
            got = photometric_distortion(as_tensor(b['img']), params, backend).permute(1, 2, 0).numpy()
            assert np.array_equal(got, a['img']), (sample['img_path'], seed, params)
            widths.add(b['img'].shape[1])
            ops |= {k for k, v in params.items() if v is not None and v is not False}
            checked += 1
    assert checked == 4 * SEEDS
    assert ops == {'brightness', 'contrast', 'contrast_last', 'saturation', 'hue'}
    assert any(w % 32 for w in widths) and 64 in widths, widths


@pytest.mark.parametrize('dtype', [np.uint8, np.int64])
def test_histogram_crop_box_is_mmsegs(dtype):
    """Label maps where many crops fail the category check (one class over most of the map, ignored columns): the
    same boxes and the same number of draws as mmseg's RandomCrop, for uint8 (the histogram) and int64 (the
    np.unique fallback) labels."""
    from mmseg.datasets.transforms import RandomCrop
    rng = np.random.default_rng(1)
    exact, new = RandomCrop(CROP, cat_max_ratio=0.75), HistogramRandomCrop(CROP, cat_max_ratio=0.75)
    retried = 0
    for seed in range(40):
        seg = np.full((90, 120), 7, dtype)
        seg[rng.integers(0, 60):, rng.integers(0, 80):] = rng.integers(0, 4)
        seg[:, :rng.integers(0, 40)] = 255
        results = dict(img=np.zeros((90, 120, 3), np.uint8), gt_seg_map=seg, seg_fields=['gt_seg_map'])
        np.random.seed(seed)
        first = np.random.randint(0, 90 - CROP[0] + 1), np.random.randint(0, 120 - CROP[1] + 1)
        np.random.seed(seed)
        want, after = exact.crop_bbox(dict(results)), np.random.random()
        np.random.seed(seed)
        got = new.crop_bbox(dict(results))
        assert got == want and np.random.random() == after, seed  # the same box after the same draws
        retried += (got[0], got[2]) != first
    assert retried >= 10, retried


def test_hsv_conversions_are_opencvs():
    """hsv_to_bgr (float32, the rounding that differs between OpenCV's vector and scalar code) on all 180 x 256 x 256
    HSV values and bgr_to_hsv (integer) on every 5th of the 2^24 BGR colours equal cv2.cvtColor, in rows of 4096 (the
    vector path) and of 37 (the scalar tail of each row; a 7th of those values)."""
    code = np.arange(1 << 24, dtype=np.uint32)
    colours = np.stack([(code >> 16) & 255, (code >> 8) & 255, code & 255], -1).astype(np.uint8)
    hsv = colours[colours[:, 0] < 180]
    for width, step in ((4096, 1), (37, 7)):
        rows = hsv[: len(hsv) // width * width].reshape(-1, width, 3)[::step]
        assert np.array_equal(hsv_to_bgr(as_tensor(rows)).permute(1, 2, 0).numpy(),
                              cv2.cvtColor(rows, cv2.COLOR_HSV2BGR)), width
        rows = colours[::5][: len(colours) // 5 // width * width].reshape(-1, width, 3)[::step]
        assert np.array_equal(bgr_to_hsv(as_tensor(rows)).permute(1, 2, 0).numpy(),
                              cv2.cvtColor(rows, cv2.COLOR_BGR2HSV)), width


PREPROCESSOR = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], bgr_to_rgb=True, pad_val=0,
                    seg_pad_val=255, size=CROP)


def batch(with_params: bool) -> dict:
    """Two crops, one smaller than CROP (padded), with label maps; the distortion carried when ``with_params``."""
    rng = np.random.default_rng(2)
    inputs, samples = [], []
    for (h, w), params in zip([(64, 64), (40, 52)], [dict(brightness=-20.5, contrast=1.3, contrast_last=True,
                                                          saturation=0.7, hue=-11),
                                                     dict(brightness=None, contrast=0.6, contrast_last=False,
                                                          saturation=None, hue=5)]):
        inputs.append(torch.from_numpy(photo_like_image(h, w, rng)).permute(2, 0, 1).contiguous())
        sample = SegDataSample(metainfo={SamplePhotoMetricDistortion.key: params} if with_params else {})
        sample.gt_sem_seg = PixelData(data=torch.from_numpy(rng.integers(0, 150, (1, h, w))))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


@pytest.mark.parametrize('training', [True, False])
def test_preprocessor_without_parameters_is_mmsegs(training):
    def data() -> dict:  # fresh samples each time: the padding rewrites them
        found = batch(with_params=False)
        return found if training else dict(inputs=found['inputs'][:1], data_samples=found['data_samples'][:1])

    want = SegDataPreProcessor(**PREPROCESSOR)(data(), training)
    got = PhotoMetricSegDataPreProcessor(**PREPROCESSOR)(data(), training)
    assert torch.equal(got['inputs'], want['inputs'])
    for a, b in zip(got['data_samples'], want['data_samples']):
        assert torch.equal(a.gt_sem_seg.data, b.gt_sem_seg.data)


def test_preprocessor_distorts_before_padding():
    """With parameters: mmseg's preprocessing of the crops distorted first; the padding keeps pad_val."""
    data = batch(with_params=True)
    distorted = dict(data, inputs=[photometric_distortion(x, s.metainfo[SamplePhotoMetricDistortion.key])
                                   for x, s in zip(data['inputs'], data['data_samples'])])
    want = SegDataPreProcessor(**PREPROCESSOR)(distorted, True)['inputs']
    got = PhotoMetricSegDataPreProcessor(**PREPROCESSOR)(batch(with_params=True), True)['inputs']
    assert torch.equal(got, want)
    assert not torch.equal(got, SegDataPreProcessor(**PREPROCESSOR)(dict(batch(with_params=True)), True)['inputs'])
    assert (got[1, :, 40:, :] == 0).all() and (got[1, :, :, 52:] == 0).all()  # padded after the normalization


def test_preprocessor_refuses_a_mixed_batch():
    data = batch(with_params=True)
    data['data_samples'][1].set_metainfo({SamplePhotoMetricDistortion.key: None})
    with pytest.raises(ValueError, match='some samples'):
        PhotoMetricSegDataPreProcessor(**PREPROCESSOR)(data, True)
