"""The GPU-decode MIM pipeline (worker: ``SampleColorJitter -> EncodedTwoViewRandomResizedCrop``; decode, jitter, flip,
crop and resizes in ``MIMDataPreprocessor``, on the CPU) against the exact and the draft pipelines on photo-like JPEGs:
the same draws for the same seed, torchvision's decode equal to OpenCV's and Pillow's, the jitter equal to mmpretrain's
``ColorJitter(backend='pillow')``, the views bounded against the exact pipeline's (Pillow 13 sometimes resizes
vertical pass first), and a mixed batch with worker-decoded fallbacks equal to its images one by one."""
from __future__ import annotations

import re

import cv2
import numpy as np
import pytest
import torch
from mmcv.transforms import Compose
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from PIL import Image

from beit_mm.data.demo.photos import photo_like_image
from beit_mm.data.transforms.color_jitter import color_jitter, stack_jitter_parameters
from beit_mm.data.transforms.device_views import decode_images
from beit_mm.data.transforms.pil_resample import pil_resize, resample_coefficients
from beit_mm.models.selfsup import MIMDataPreprocessor
from beit_mm.models.tokenizers import DALLEEncoder

from ..conftest import ROOT
from .test_draft_transforms import run, write_photos

SIZE, TOKENIZER_SIZE = 64, 32
MASK = dict(type='beit_mm.BEiTMaskGenerator', input_size=4, num_masking_patches=6, min_num_patches=2)
JITTER = dict(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.)
META = ('img_path', 'ori_shape', 'img_shape', 'flip', 'crop_bbox', 'color_jitter', 'two_view_resize')


def exact_pipeline(jitter: bool = True, size: int = SIZE, tokenizer_size: int = TOKENIZER_SIZE) -> Compose:
    return Compose([dict(type='LoadImageFromFile')]
                   + ([dict(type='mmpretrain.ColorJitter', **JITTER)] if jitter else [])
                   + [dict(type='mmpretrain.RandomFlip', prob=0.5, direction='horizontal'),
                      dict(type='beit_mm.TwoViewRandomResizedCrop', size=size, tokenizer_size=tokenizer_size,
                           backend='pillow'), MASK])


def draft_pipeline() -> Compose:
    return Compose([dict(type='beit_mm.SampleColorJitter', **JITTER),
                    dict(type='beit_mm.DecodeTwoViewRandomResizedCrop', size=SIZE, tokenizer_size=TOKENIZER_SIZE,
                         flip_prob=0.5), MASK])


def gpu_pipeline(jitter: bool = True, size: int = SIZE, tokenizer_size: int = TOKENIZER_SIZE) -> Compose:
    return Compose(([dict(type='beit_mm.SampleColorJitter', **JITTER)] if jitter else [])
                   + [dict(type='beit_mm.EncodedTwoViewRandomResizedCrop', size=size, tokenizer_size=tokenizer_size,
                           flip_prob=0.5), MASK, dict(type='mmpretrain.PackInputs', meta_keys=META)])


PRE = MIMDataPreprocessor(mean=[0.] * 3, std=[1.] * 3, to_rgb=True)


def device_views(samples: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """The preprocessor's (views, tokenizer views) of packed samples, float 0..255 RGB."""
    out = PRE(pseudo_collate(samples))['inputs']
    return out['images'], out['target_images']


def rgb(bgr: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(bgr[:, :, ::-1])).permute(2, 0, 1).float()


@pytest.fixture(scope='module')
def photos(tmp_path_factory) -> list[str]:
    """Photo-like JPEGs: ImageNet's two shapes, a small one and a large one."""
    return write_photos(tmp_path_factory.mktemp('photos'), [(375, 500), (500, 375), (96, 128), (480, 640)])


def test_same_draws_as_the_exact_and_draft_pipelines(photos):
    """Jitter parameters, flip, crop box and mask: equal for 30 seeds x 4 images."""
    exact, draft, gpu = exact_pipeline(), draft_pipeline(), gpu_pipeline()
    flips = set()
    for path in photos:
        for seed in range(30):
            a, b, c = run(exact, path, seed), run(draft, path, seed), run(gpu, path, seed)
            sample = c['data_samples']
            assert tuple(sample.crop_bbox) == a['crop_bbox'] == b['crop_bbox'], (path, seed)
            assert sample.flip == a['flip'] == b['flip']
            assert torch.equal(torch.as_tensor(sample.mask), torch.as_tensor(a['mask']))
            jitter = {k: v for k, v in b['color_jitter'].items() if k != 'contrast_mean'}
            assert sample.color_jitter == jitter and tuple(sample.ori_shape) == a['ori_shape']
            assert c['inputs'].dim() == 1  # the bytes: nothing decoded on the worker
            flips.add(sample.flip)
    assert flips == {True, False}


def test_cpu_decode_equals_opencv_and_pillow(photos):
    """The preprocessor's batched decode (torchvision's decode_jpeg on the CPU) vs OpenCV's imdecode (the exact
    pipeline's) and Pillow's: equal pixels."""
    datas = [np.fromfile(path, np.uint8) for path in photos]
    decoded = decode_images([torch.from_numpy(d) for d in datas], 'cpu')
    for path, data, image in zip(photos, datas, decoded):
        ours = image.permute(1, 2, 0).numpy()
        opencv = cv2.imdecode(data, cv2.IMREAD_COLOR)[:, :, ::-1]
        assert np.array_equal(ours, opencv), np.abs(ours.astype(int) - opencv).max()
        assert np.array_equal(ours, np.asarray(Image.open(path).convert('RGB')))


def test_whole_image_jitter_equals_pillow(photos):
    """mmpretrain's ColorJitter(backend='pillow') on the whole BGR image vs the preprocessor's jitter of the whole
    RGB image with the same draws (the contrast grey its own, at its step): equal uint8 values, 24 cases."""
    from mmpretrain.datasets.transforms import ColorJitter
    from beit_mm.data.transforms.color_jitter import SampleColorJitter
    checked = 0
    for path in photos:
        bgr = cv2.imread(path)
        for seed in range(6):
            np.random.seed(seed)
            want = ColorJitter(**JITTER)(dict(img=bgr.copy()))['img']
            np.random.seed(seed)
            params = stack_jitter_parameters([SampleColorJitter(**JITTER)(dict())['color_jitter']], whole_images=True)
            got = color_jitter(rgb(bgr)[None], *params)[0]
            assert torch.equal(got, rgb(want)), (path, seed)
            checked += 1
    assert checked == 24


def test_resize_equals_pillow_when_it_runs_horizontal_first():
    """Crops whose width shrinks more than their height (Pillow's horizontal pass first): equal to Pillow's
    bicubic and Lanczos resize; and the fixed-point weights sum to 1 << 22 within rounding."""
    rng = np.random.default_rng(3)
    image = photo_like_image(300, 400, rng)
    for h, w, out in [(120, 390, (64, 64)), (200, 300, (100, 100)), (64, 64, (224, 224)), (150, 399, (37, 50))]:
        crop = np.ascontiguousarray(image[:h, :w])
        for name, resample in (('bicubic', Image.BICUBIC), ('lanczos', Image.LANCZOS)):
            want = np.asarray(Image.fromarray(crop).resize(out[::-1], resample))
            got = pil_resize(torch.from_numpy(crop).permute(2, 0, 1), out, name).permute(1, 2, 0).numpy()
            assert np.array_equal(got, want), (h, w, out, name, np.abs(got.astype(int) - want).max())
    _, weights = resample_coefficients(375, 112, 'lanczos')
    assert np.abs(weights.sum(1) - (1 << 22)).max() <= weights.shape[1]


def test_views_close_to_the_exact_pipeline(photos):
    """Whole pipeline (decode, jitter, flip, crop, the two resizes) vs the exact pipeline at 224 + 112, same seeds: at
    least 80% of the views equal, the others <= 0.5 levels mean and <= 16 single pixels."""
    exact, gpu = exact_pipeline(size=224, tokenizer_size=112), gpu_pipeline(size=224, tokenizer_size=112)
    equal = total = 0
    for path in photos:
        for seed in range(4):
            a = run(exact, path, seed)
            views = device_views([run(gpu, path, seed)])
            for got, want in zip(views, a['img']):
                diff = (got[0] - rgb(want)).abs()
                assert diff.mean() <= 0.5 and diff.max() <= 16, (path, seed, diff.mean(), diff.max())
                equal += bool(diff.max() == 0)
                total += 1
    assert equal >= 0.8 * total, (equal, total)


@pytest.fixture(scope='module')
def odd_files(tmp_path_factory, photos) -> list[str]:
    """The files the worker decodes itself: a greyscale JPEG, an EXIF-rotated JPEG, a PNG."""
    folder = tmp_path_factory.mktemp('odd')
    rng = np.random.default_rng(5)
    grey, rotated, png = str(folder / 'grey.jpg'), str(folder / 'rotated.jpg'), str(folder / 'photo.png')
    Image.fromarray(photo_like_image(90, 120, rng)[:, :, 0]).save(grey, quality=90)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(photo_like_image(96, 128, rng)).save(rotated, quality=90, exif=exif)
    Image.fromarray(photo_like_image(100, 80, rng)).save(png)
    return [grey, rotated, png]


def test_mixed_batch_with_worker_decoded_fallbacks(photos, odd_files):
    """A batch of 7 sizes, JPEG bytes and worker-decoded images together: each view equals the same image's alone, the
    fallbacks carry the decoded upright image, and their views match the exact pipeline's within the resize bound."""
    gpu, exact = gpu_pipeline(), exact_pipeline()
    paths = photos + odd_files
    samples = [run(gpu, path, 7) for path in paths]
    assert [s['inputs'].dim() for s in samples] == [1, 1, 1, 1, 3, 3, 3]
    assert tuple(samples[5]['inputs'].shape) == (3, 128, 96)  # upright
    batch = device_views(samples)
    for i, (sample, path) in enumerate(zip(samples, paths)):
        alone = device_views([sample])
        for got, one, want in zip(batch, alone, run(exact, path, 7)['img']):
            assert torch.equal(got[i], one[0])
            assert (got[i] - rgb(want)).abs().mean() <= 0.5, path


def test_preprocessor_refuses_stacked_bytes_and_a_lying_header(photos):
    sample = run(gpu_pipeline(), photos[2], 0)
    with pytest.raises(ValueError, match='pseudo_collate'):
        PRE(dict(inputs=torch.stack([sample['inputs']]), data_samples=[sample['data_samples']]))
    sample['data_samples'].set_metainfo(dict(ori_shape=(97, 128)))
    with pytest.raises(ValueError, match='declared'):
        PRE(pseudo_collate([sample]))
    with pytest.raises(ValueError, match='lanczos'):
        Compose([dict(type='beit_mm.EncodedTwoViewRandomResizedCrop', interpolation='bilinear')])


def test_demo_mim_trains_with_the_gpu_decode_pipeline(tmp_path):
    """The demo MIM config with the GPU-decode pipeline (the demo's sizes and mask) and pseudo_collate, set by
    cfg_options: 2 iterations through ``beit_mm.apis.train.train`` in this process."""
    from beit_mm.apis.train import train
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    config = f'{ROOT}/configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'
    cfg = Config.fromfile(config)
    pipeline = Config.fromfile(f'{ROOT}/configs/_base_/datasets/imagenet_mim.py').train_pipeline_gpu_decode
    pipeline[1].update(size=cfg.img_size, tokenizer_size=cfg.img_size // 2, scale=(0.2, 1.0))
    pipeline[2] = cfg.train_pipeline[4]
    torch.save(DALLEEncoder(**cfg.tokenizer).state_dict(), tmp_path / 'tokenizer.pth')
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=1, size=128, seed=0)
    train(config, work_dir=str(tmp_path / 'work'), cfg_options={
        'model.target_generator.init_cfg.checkpoint': str(tmp_path / 'tokenizer.pth'),
        'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
        'train_dataloader.batch_size': 4, 'train_dataloader.collate_fn': dict(type='pseudo_collate'),
        'train_dataloader.dataset.pipeline': pipeline, 'train_dataloader.dataset.data_root': root,
        'train_cfg.max_iters': 2, 'default_hooks.logger.interval': 1, 'default_hooks.checkpoint.interval': 2})
    dumped = [p.read_text() for p in (tmp_path / 'work').rglob('*.py')]
    assert dumped and all('EncodedTwoViewRandomResizedCrop' in text and 'pseudo_collate' in text for text in dumped)
    logs = list((tmp_path / 'work').rglob('*.log'))
    log = logs[0].read_text()
    assert re.search(r'Iter\(train\) \[2/2\].*loss: \d.*mim_acc: \d', log), log[-2000:]
