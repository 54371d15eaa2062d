"""The draft MIM pipeline (``SampleColorJitter -> DecodeTwoViewRandomResizedCrop`` + the jitter in
``MIMDataPreprocessor``) against the exact one (microsoft/unilm@768a3c87 ``beit/datasets.py`` lines 33-41 in
mmpretrain's transforms) on photo-like JPEGs: the same draws for the same seed, the jitter equal to mmpretrain's
``ColorJitter(backend='pillow')`` uint8 for uint8, and the reduced-decode views within the bounds asserted below."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from mmcv.transforms import Compose
from mmpretrain.structures import DataSample
from PIL import Image, ImageEnhance, ImageStat

from beit_mm.data.demo.photos import photo_like_image
from beit_mm.data.transforms.color_jitter import (SampleColorJitter, color_jitter, pil_luma, stack_jitter_parameters,
                                                  whole_image_contrast_mean)
from beit_mm.data.transforms.decode import DecodeTwoViewRandomResizedCrop, draft_scale
from beit_mm.models.selfsup import MIMDataPreprocessor

SIZE, TOKENIZER_SIZE = 64, 32
MASK = dict(type='beit_mm.BEiTMaskGenerator', input_size=4, num_masking_patches=6, min_num_patches=2)
JITTER = dict(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.)


def exact_pipeline(jitter: bool = True) -> Compose:
    return Compose([dict(type='LoadImageFromFile')]
                   + ([dict(type='mmpretrain.ColorJitter', **JITTER)] if jitter else [])
                   + [dict(type='mmpretrain.RandomFlip', prob=0.5, direction='horizontal'),
                      dict(type='beit_mm.TwoViewRandomResizedCrop', size=SIZE, tokenizer_size=TOKENIZER_SIZE,
                           backend='pillow'), MASK])


def draft_pipeline(jitter: bool = True, draft: bool = True) -> Compose:
    return Compose(([dict(type='beit_mm.SampleColorJitter', **JITTER)] if jitter else [])
                   + [dict(type='beit_mm.DecodeTwoViewRandomResizedCrop', size=SIZE, tokenizer_size=TOKENIZER_SIZE,
                           flip_prob=0.5, draft=draft), MASK])


def write_photos(folder, shapes: list[tuple[int, int]]) -> list[str]:
    """Photo-like JPEGs (q90) of the (height, width) ``shapes`` in ``folder``, seed 0: their paths."""
    rng = np.random.default_rng(0)
    paths = []
    for i, (h, w) in enumerate(shapes):
        path = str(folder / f'photo_{i}.jpg')
        Image.fromarray(photo_like_image(h, w, rng)).save(path, quality=90)
        paths.append(path)
    return paths


@pytest.fixture(scope='module')
def photos(tmp_path_factory) -> list[str]:
    """Photo-like JPEGs: landscape, portrait, and large ones whose crops allow a 1/2-1/8 scale decode."""
    return write_photos(tmp_path_factory.mktemp('photos'), [(96, 128), (128, 96), (480, 640), (600, 450)])


def run(pipeline: Compose, path: str, seed: int) -> dict:
    np.random.seed(seed)
    return pipeline(dict(img_path=path))


def test_same_seed_same_crop_box_flip_and_mask(photos):
    """The draws of ColorJitter (order, 3 factors), RandomFlip and the crop box, then the mask, in the exact
    pipeline's order: equal boxes, flips and masks for 60 seeds x 4 images."""
    exact, draft = exact_pipeline(), draft_pipeline()
    flips = set()
    for path in photos:
        for seed in range(15):
            a, b = run(exact, path, seed), run(draft, path, seed)
            assert a['crop_bbox'] == b['crop_bbox'] and a['flip'] == b['flip'], (path, seed)
            assert (a['mask'] == b['mask']).all()
            assert b['img_shape'] == (SIZE, SIZE) and b['ori_shape'] == a['ori_shape']
            flips.add(b['flip'])
    assert flips == {True, False}


def test_jitter_factors_are_mmpretrains():
    from mmpretrain.datasets.transforms import ColorJitter
    ref = ColorJitter(**JITTER)
    for seed in range(5):
        np.random.seed(seed)
        order, b, c, s, h = ref._rand_params()
        np.random.seed(seed)
        got = SampleColorJitter(**JITTER)(dict())['color_jitter']
        assert got == dict(order=list(order), brightness=b, contrast=c, saturation=s) and h is None
    with pytest.raises(ValueError, match='hue'):
        SampleColorJitter(hue=0.1)


def test_views_equal_the_exact_pipeline_at_full_scale_without_jitter(photos):
    """No jitter, no draft: the same crop resized by Pillow from Pillow's decode vs OpenCV's (both libjpeg-turbo)."""
    exact, draft = exact_pipeline(jitter=False), draft_pipeline(jitter=False, draft=False)
    worst = 0
    for path in photos:
        for seed in range(4):
            a, b = run(exact, path, seed), run(draft, path, seed)
            for va, vb in zip(a['img'], b['img']):
                worst = max(worst, np.abs(va.astype(int) - vb.astype(int)).max())
    assert worst <= 1, worst


def test_preprocessor_jitter_equals_pillow_on_the_same_crop(photos):
    """mmpretrain's ColorJitter(backend='pillow') on a BGR crop vs MIMDataPreprocessor's jitter of the same crop with
    the same draws: equal uint8 values (the contrast grey computed on that crop, as Pillow does)."""
    from mmpretrain.datasets.transforms import ColorJitter
    pre = MIMDataPreprocessor(mean=[0.] * 3, std=[1.] * 3, to_rgb=True)
    checked = 0
    for path in photos:
        bgr = np.asarray(Image.open(path).convert('RGB'))[16:80, 24:104, ::-1].copy()  # a 64 x 80 crop
        for seed in range(6):
            np.random.seed(seed)
            ref = ColorJitter(**JITTER)(dict(img=bgr.copy()))['img']
            np.random.seed(seed)
            params = SampleColorJitter(**JITTER)(dict())['color_jitter']
            params['contrast_mean'] = whole_image_contrast_mean(bgr, params, max_side=max(bgr.shape))
            view = torch.from_numpy(bgr).permute(2, 0, 1).contiguous()
            sample = DataSample(metainfo=dict(color_jitter=params)).set_mask(torch.ones(2, 2, dtype=torch.bool))
            out = pre(dict(inputs=[[view, view]], data_samples=[sample]))['inputs']
            for got in (out['images'][0], out['target_images'][0]):
                assert torch.equal(got, torch.from_numpy(ref[:, :, ::-1].copy()).permute(2, 0, 1).float())
            checked += 1
    assert checked == 24


def test_pil_luma_and_contrast_grey_are_pillows(photos):
    rgb = np.asarray(Image.open(photos[2]).convert('RGB'))
    luma = pil_luma(torch.from_numpy(rgb).permute(2, 0, 1)[None])[0, 0].numpy()
    assert (luma == np.asarray(Image.fromarray(rgb).convert('L'))).all()


def test_contrast_grey_of_the_reduced_image_within_one_level(photos):
    """The grey the draft pipeline carries (the decoded whole image resized, the ops before contrast applied) is within
    1 level of Pillow's grey of the full-size image in the exact pipeline."""
    equal = total = 0
    for path in photos[2:]:
        full = Image.open(path).convert('RGB')
        for seed in range(50):
            np.random.seed(seed)
            params = SampleColorJitter(**JITTER)(dict())['color_jitter']
            exact = full
            for op in params['order']:
                if op == 1:
                    break
                if op in (0, 2):
                    exact = (ImageEnhance.Brightness if op == 0 else ImageEnhance.Color)(exact).enhance(
                        params['brightness' if op == 0 else 'saturation'])
            want = int(ImageStat.Stat(exact.convert('L')).mean[0] + 0.5)
            got = whole_image_contrast_mean(np.asarray(full)[:, :, ::-1], params)
            assert abs(got - want) <= 1, (path, seed, got, want)
            equal += got == want
            total += 1
    assert equal >= 0.9 * total, (equal, total)


def test_draft_scale_is_the_smallest_decode_that_covers_the_output():
    assert draft_scale(224, 224, 224, 224) == 1
    assert draft_scale(447, 500, 224, 224) == 1
    assert draft_scale(448, 500, 224, 224) == 2
    assert draft_scale(1800, 2000, 224, 224) == 8
    assert draft_scale(1800, 300, 224, 224) == 1


def test_reduced_scale_decode_difference_is_bounded(photos):
    """Views resampled from a 1/2-1/8 scale decode vs from the full decode, same crops (large images only): mean
    absolute difference <= 4 levels per image (measured: <= 3.45), single pixels <= 40 (measured: 23)."""
    reduced, full = draft_pipeline(jitter=False), draft_pipeline(jitter=False, draft=False)
    scales = set()
    for path in photos[2:]:
        for seed in range(20):
            a, b = run(reduced, path, seed), run(full, path, seed)
            scales.add(a['draft_scale'])
            for va, vb in zip(a['img'], b['img']):
                diff = np.abs(va.astype(np.float32) - vb.astype(np.float32))
                assert diff.mean() <= 4.0 and diff.max() <= 40, (path, seed, diff.mean(), diff.max())
    assert {2, 4} <= scales


def test_jitter_after_the_resize_close_to_the_exact_pipeline(photos):
    """At decode scale 1, same seeds: the views jittered after the resize (in the preprocessor) differ from the exact
    pipeline's (jittered before the crop) by <= 2 levels on average per image."""
    exact, draft = exact_pipeline(), draft_pipeline(draft=False)
    pre = MIMDataPreprocessor(mean=[0.] * 3, std=[1.] * 3, to_rgb=True)
    for path in photos:
        for seed in range(5):
            a, b = run(exact, path, seed), run(draft, path, seed)
            sample = DataSample(metainfo=dict(color_jitter=b['color_jitter'])).set_mask(
                torch.ones(2, 2, dtype=torch.bool))
            views = [torch.from_numpy(np.ascontiguousarray(v)).permute(2, 0, 1) for v in b['img']]
            out = pre(dict(inputs=[views], data_samples=[sample]))['inputs']
            for got, want in zip((out['images'][0], out['target_images'][0]), a['img']):
                want = torch.from_numpy(want[:, :, ::-1].copy()).permute(2, 0, 1).float()
                assert (got - want).abs().mean() <= 2.0, (path, seed, (got - want).abs().mean())


def test_exif_orientation_is_applied_as_opencv_does(tmp_path):
    """A JPEG stored sideways with EXIF orientation 6: the box is drawn on the upright size, as after OpenCV's
    decode in the exact pipeline."""
    rgb = photo_like_image(96, 128, np.random.default_rng(1))
    exif = Image.Exif()
    exif[0x0112] = 6
    path = str(tmp_path / 'rotated.jpg')
    Image.fromarray(rgb).save(path, quality=90, exif=exif)
    a, b = run(exact_pipeline(jitter=False), path, 3), run(draft_pipeline(jitter=False), path, 3)
    assert a['ori_shape'] == b['ori_shape'] == (128, 96)
    assert a['crop_bbox'] == b['crop_bbox']
    assert np.abs(a['img'][0].astype(int) - b['img'][0].astype(int)).max() <= 1


def test_preprocessor_refuses_a_half_jittered_batch_and_a_missing_grey():
    pre = MIMDataPreprocessor(mean=[0.] * 3, std=[1.] * 3)
    views = [torch.zeros(3, 4, 4, dtype=torch.uint8)] * 2
    jitter = dict(order=[0, 1, 2, 3], brightness=1.1, contrast=0.9, saturation=1.0, contrast_mean=3)
    samples = [DataSample(metainfo=dict(color_jitter=jitter)).set_mask(torch.ones(2, 2, dtype=torch.bool)),
               DataSample().set_mask(torch.ones(2, 2, dtype=torch.bool))]
    with pytest.raises(ValueError, match='some samples'):
        pre(dict(inputs=[views, views], data_samples=samples))
    with pytest.raises(ValueError, match='contrast_mean'):
        stack_jitter_parameters([{k: v for k, v in jitter.items() if k != 'contrast_mean'}])


def test_color_jitter_skips_ops_that_are_off():
    images = torch.full((2, 3, 2, 2), 100, dtype=torch.uint8)
    order = torch.tensor([[0, 1, 2, 3], [2, 1, 0, 3]])
    nan = float('nan')
    out = color_jitter(images, order, torch.tensor([1.5, nan]), torch.tensor([nan, nan]), torch.tensor([nan, nan]),
                       torch.zeros(2, dtype=torch.int64))
    assert out[0].eq(150).all() and out[1].eq(100).all()


def test_draft_reads_the_file_bytes(photos):
    """The transform reads ``img_path`` itself (no LoadImageFromFile before it) through MMEngine's file backend."""
    out = DecodeTwoViewRandomResizedCrop(size=SIZE, tokenizer_size=TOKENIZER_SIZE)(dict(img_path=photos[0]))
    assert [v.shape for v in out['img']] == [(SIZE, SIZE, 3), (TOKENIZER_SIZE, TOKENIZER_SIZE, 3)]
    with open(photos[0], 'rb') as f:
        assert Image.open(io.BytesIO(f.read())).size == (128, 96)


@pytest.mark.parametrize('flip', [False, True])
def test_fine_tuning_crop_equals_load_and_random_resized_crop(photos, flip):
    """``DecodeRandomResizedCrop`` vs mmpretrain's ``LoadImageFromFile -> RandomResizedCrop(backend='pillow')`` (and
    with ``flip_prob``, mmcv's ``RandomFlip`` after it), same seeds: the same box, flip and NumPy RNG state after, and,
    at decode scale 1, the same pixels; at a reduced scale (the large images) within the reduced-decode bound above."""
    crop = dict(scale=SIZE, interpolation='bicubic')
    exact = Compose([dict(type='LoadImageFromFile'), dict(type='mmpretrain.RandomResizedCrop', backend='pillow', **crop)]
                    + [dict(type='mmpretrain.RandomFlip', prob=0.5, direction='horizontal')] * flip)
    draft = Compose([dict(type='beit_mm.DecodeRandomResizedCrop', **crop, **({'flip_prob': 0.5} if flip else {}))])
    scales, flips = set(), set()
    for path in photos:
        for seed in range(10):
            a = run(exact, path, seed)
            after = np.random.random()
            b = run(draft, path, seed)
            assert np.random.random() == after, (path, seed)
            assert a.get('flip') == b.get('flip') and a.get('flip_direction') == b.get('flip_direction')
            flips.add(b.get('flip'))
            scales.add(b['draft_scale'])
            diff = np.abs(a['img'].astype(np.float32) - b['img'].astype(np.float32))
            if b['draft_scale'] == 1:
                assert diff.max() == 0, (path, seed)
            else:
                assert diff.mean() <= 4.0, (path, seed, diff.mean())
            assert b['img'].shape == (SIZE, SIZE, 3) and b['ori_shape'] == a['ori_shape']
            assert b['img'].flags.writeable  # RandAugment and RandomErasing write into it
    assert {1, 2} <= scales and flips == ({False, True} if flip else {None})


def _jpeg_variants() -> dict[str, bytes]:
    """JPEGs of every kind the header reader sees: greyscale, 4:4:4 / 4:2:2 / 4:2:0, progressive, CMYK, with an EXIF
    orientation, an MPO (an MPF segment), and a COM and APP segment before the frame."""
    rgb = photo_like_image(40, 56, np.random.default_rng(2))
    image = Image.fromarray(rgb)
    variants = {}

    def save(name, im, **kwargs):
        buffer = io.BytesIO()
        im.save(buffer, **{'format': 'JPEG', **kwargs})
        variants[name] = buffer.getvalue()

    save('grey', image.convert('L'))
    for sub in (0, 1, 2):
        save(f'subsampling_{sub}', image, subsampling=sub)
    save('progressive', image, progressive=True)
    save('cmyk', image.convert('CMYK'))
    exif = Image.Exif()
    exif[0x0112] = 6
    save('exif_rotated', image, exif=exif)
    exif[0x0112] = 1
    save('exif_upright', image, exif=exif)
    save('mpo', image, format='MPO', save_all=True, append_images=[image.rotate(90)])
    plain = variants['subsampling_2']
    variants['comment'] = plain[:2] + b'\xff\xfe\x00\x07hello' + b'\xff\xeb\x00\x04ab' + plain[2:]
    return variants


def test_header_layout_reads_what_pillow_reads(monkeypatch):
    """``header_layout`` (the file room's marker scan for plain JPEGs) gives Pillow's size, format, mode and EXIF
    orientation for every kind of JPEG and a PNG; plain JPEGs never reach Pillow's parser, an EXIF or MPF one does."""
    from beit_mm.data.transforms import decode as draft_transforms
    variants = _jpeg_variants()
    png = io.BytesIO()
    Image.fromarray(photo_like_image(20, 30, np.random.default_rng(3))).save(png, format='PNG')
    variants['png'] = png.getvalue()
    for name, data in variants.items():
        image = Image.open(io.BytesIO(data))
        orientation = image.getexif().get(0x0112, 1) if image.format == 'JPEG' and 'exif' in image.info else 1
        want = (image.size[1], image.size[0], image.format, image.mode, orientation)
        assert draft_transforms.header_layout(data) == want, name
    opened = []
    real_open = Image.open
    monkeypatch.setattr(draft_transforms.Image, 'open', lambda *a, **k: opened.append(1) or real_open(*a, **k))
    for name, data in variants.items():
        opened.clear()
        draft_transforms.header_layout(data)
        assert bool(opened) == (name in ('exif_rotated', 'exif_upright', 'mpo', 'png')), name


@pytest.mark.parametrize('transform', ['DecodeTwoViewRandomResizedCrop', 'DecodeRandomResizedCrop'])
def test_crop_refuses_a_decode_of_another_size_than_declared(photos, transform, monkeypatch):
    """A header whose size is not what OpenCV decodes (the box was drawn on it): an error naming the file and both
    sizes, at full and at reduced scale, instead of a clipped crop."""
    from beit_mm.data.transforms import decode as draft_transforms
    step = Compose([dict(type=f'beit_mm.{transform}', **({'size': SIZE} if 'TwoView' in transform else
                                                          {'scale': SIZE}))])
    for path, lying in ((photos[0], (97, 128, True)), (photos[2], (480, 641, True))):
        monkeypatch.setattr(draft_transforms, 'upright_size', lambda data, source=None, lying=lying: lying)
        for seed in range(3):
            with pytest.raises(ValueError, match=f'{path}: decoded to .* but its header declared {lying[0]} x '):
                run(step, path, seed)
