"""RandAugment and RandomErasing drawn on the worker and applied by ``AugmentClsDataPreprocessor`` against mmpretrain
1.2.0's ``RandAugment`` and ``RandomErasing`` as the fine-tuning recipes use them (microsoft/unilm@768a3c87
``beit/datasets.py`` ``build_transform``: ``rand-m9-mstd0.5-inc1``, ``reprob 0.25``, ``remode 'pixel'``).

Exact: each of the 15 ``timm_increasing`` ops with the same seed, the recipe's two-op RandAugment, the erasing box and
every pixel outside it. Same distribution (two-sample Kolmogorov-Smirnov tests): the erasing noise and the draws of
the images after an erased one."""
from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from mmcv.transforms import Compose
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.structures import DataSample
from PIL import Image
from scipy import stats

from beit_mm.data.demo.photos import photo_like_image
from beit_mm.data.transforms.rand_augment import SampleRandAugment, rand_augment
from beit_mm.data.transforms.random_erasing import SampleRandomErasing, random_erasing
from beit_mm.data.transforms.warp_affine import inverse_affine, warp_affine_bicubic
from beit_mm.models.classifiers import AugmentClsDataPreprocessor

FT_CONFIG = 'configs/beit/beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py'
BGR_MEAN, BGR_STD = [103.53, 116.28, 123.675], [57.375, 57.12, 58.395]
RECIPE = dict(policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9, magnitude_std=0.5,
              hparams=dict(pad_val=[104, 116, 124], interpolation='bicubic'))
ERASING = dict(erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3, fill_color=BGR_MEAN,
               fill_std=BGR_STD)


def tensor(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).contiguous()


def array(image: torch.Tensor) -> np.ndarray:
    return image.permute(1, 2, 0).numpy()


@pytest.fixture(scope='module')
def crops() -> list[np.ndarray]:
    """Photo-like BGR crops: the recipe's 224 px, and smaller odd sizes (the ops must not assume square images)."""
    rng = np.random.default_rng(0)
    return [photo_like_image(h, w, rng)[..., ::-1].copy() for h, w in ((224, 224), (224, 224), (61, 83), (90, 47))]


def test_warp_equals_opencv_bicubic_constant_border(crops):
    """``warp_affine_bicubic`` is ``cv2.warpAffine(INTER_CUBIC, BORDER_CONSTANT)`` value for value, for mmcv's
    rotation (float64 matrix), shear and translation (float32 matrices) and random matrices with a scale."""
    rng = np.random.default_rng(1)
    differing = total = 0
    for image in crops + [rng.integers(0, 256, (37, 52, 3), dtype=np.uint8)]:
        h, w = image.shape[:2]
        for kind in range(4):
            if kind == 0:
                matrix = cv2.getRotationMatrix2D(((w - 1) * 0.5, (h - 1) * 0.5), float(rng.uniform(-30, 30)), 1.0)
            elif kind == 1:
                matrix = np.float32([[1, rng.uniform(-0.3, 0.3), 0], [0, 1, 0]])
            elif kind == 2:
                matrix = np.float32([[1, 0, 0], [0, 1, rng.uniform(-0.45, 0.45) * h]])
            else:
                matrix = rng.uniform(-1, 1, (2, 3)) * [[0.3, 0.3, 20], [0.3, 0.3, 20]] + [[1, 0, 0], [0, 1, 0]]
            border = tuple(int(v) for v in rng.integers(0, 256, 3))
            ref = cv2.warpAffine(image, matrix, (w, h), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_CONSTANT,
                                 borderValue=border)
            out = warp_affine_bicubic(tensor(image)[None], torch.tensor([inverse_affine(matrix)], dtype=torch.float64),
                                      torch.tensor([border]))
            differing += int((array(out[0]) != ref).sum())
            total += ref.size
    assert total > 10 ** 6
    assert differing == 0


@pytest.mark.parametrize('policy', [dict(p) for p in __import__(
    'mmpretrain.datasets.transforms.auto_augment', fromlist=['RANDAUG_POLICIES']).RANDAUG_POLICIES['timm_increasing']],
    ids=lambda p: p['type'] + ('-' + p['direction'] if 'direction' in p else ''))
@pytest.mark.parametrize('backend', ['torch', 'opencv'])
def test_each_op_equals_mmpretrain(policy, backend, crops):
    """Each ``timm_increasing`` op alone (the recipe's magnitude 9, std 0.5, pad colour, bicubic), 24 seeds per crop:
    the same NumPy draws (equal RNG state after) and the same uint8 image as mmpretrain's op on the worker, by the
    tensor ops and by mmcv's calls from the drawn parameters (the CPU path)."""
    args = dict(RECIPE, policies=[policy], num_policies=1)
    init_default_scope('mmpretrain')
    reference = Compose([dict(type='mmpretrain.RandAugment', **args)])
    sample = SampleRandAugment(**args)
    applied = 0
    for image in crops:
        for seed in range(24 if image.shape[0] < 224 else 6):
            np.random.seed(seed)
            expected = reference(dict(img=image.copy(), img_shape=image.shape[:2]))['img']
            after_reference = np.random.get_state()[1].copy(), np.random.get_state()[2]
            np.random.seed(seed)
            ops = sample(dict(img_shape=image.shape[:2]))['rand_augment']
            assert (np.random.get_state()[1] == after_reference[0]).all()
            assert np.random.get_state()[2] == after_reference[1]
            applied += len(ops)
            out = array(rand_augment(tensor(image)[None], [ops], backend)[0])
            assert (out == expected).all(), (policy, seed, ops, int((out != expected).sum()))
    assert applied >= 10  # prob 0.5: about half of the draws apply the op


def _reference_crop(image: np.ndarray, seed: int, erase: bool) -> np.ndarray:
    np.random.seed(seed)
    pipeline = [dict(type='mmpretrain.RandAugment', **RECIPE)] + (
        [dict(type='mmpretrain.RandomErasing', **ERASING)] if erase else [])
    return Compose(pipeline)(dict(img=image.copy(), img_shape=image.shape[:2]))['img']


@pytest.mark.parametrize('backend', ['torch', 'opencv'])
def test_recipe_rand_augment_and_erasing_equal_mmpretrain(backend, crops):
    """The recipe's RandAugment (2 ops) then RandomErasing, 80 seeds on the 224 px crops: the RandAugment result
    equal; the erasing box the same and every pixel outside it equal."""
    init_default_scope('mmpretrain')
    sample = Compose([SampleRandAugment(**RECIPE), SampleRandomErasing(**ERASING)])
    erased = 0
    for image in crops[:2]:
        for seed in range(40):
            np.random.seed(seed)
            drawn = sample(dict(img_shape=image.shape[:2]))
            augmented = rand_augment(tensor(image)[None], [drawn['rand_augment']], backend)
            assert (array(augmented[0]) == _reference_crop(image, seed, erase=False)).all()
            out = array(random_erasing(augmented, [drawn['random_erasing']])[0])
            expected = _reference_crop(image, seed, erase=True)
            outside = np.ones(image.shape[:2], bool)
            if drawn['random_erasing'] is not None:
                top, left, h, w = drawn['random_erasing']['box']
                outside[top:top + h, left:left + w] = False
                erased += 1
                # the reference filled the same box: its pixels there are noise around the fill colour
                assert abs(float(expected[~outside].mean()) - np.mean(BGR_MEAN)) < 12
            assert (out[outside] == expected[outside]).all()
    assert 10 <= erased <= 35  # erase_prob 0.25 of 80


def test_erasing_fill_has_mmpretrains_distribution():
    """The device-side fill against mmpretrain's NumPy fill on the same box: per channel a two-sample KS test on
    ~4 x 10^4 values ('rand' with fill_std, and uniform without); 'const' exactly the truncated colour."""
    init_default_scope('mmpretrain')
    image = np.zeros((224, 224, 3), np.uint8)
    box = dict(box=(10, 20, 150, 90), fill_color=tuple(BGR_MEAN))
    for mode, std in (('rand', tuple(BGR_STD)), ('rand', None), ('const', None)):
        reference = Compose([dict(type='mmpretrain.RandomErasing', erase_prob=1., min_area_ratio=0.2,
                                  max_area_ratio=0.2, aspect_range=(1 / 6, 1 / 6), mode=mode, fill_color=BGR_MEAN,
                                  fill_std=std)])
        ref = reference(dict(img=image.copy()))['img']
        patch_ref = ref[ref.any(axis=2)] if mode != 'const' else None
        torch.manual_seed(0)
        out = array(random_erasing(tensor(image)[None], [dict(box, mode=mode, fill_std=std)])[0])[10:160, 20:110]
        if mode == 'const':
            assert (out == np.array(BGR_MEAN, np.float64).astype(np.uint8)).all()
            continue
        for c in range(3):
            assert stats.ks_2samp(patch_ref[:, c], out.reshape(-1, 3)[:, c]).pvalue > 1e-3, (mode, c)


def _summary(image: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    return float(image.mean()), float((image != base).any(axis=2).mean())


def test_sequential_draws_have_the_exact_pipelines_distribution():
    """Without a reseed between images, the draws after an erased image differ from the exact pipeline's but not in
    distribution: two-sample KS tests over 10^4 images on output means, changed fractions and erasing areas."""
    init_default_scope('mmpretrain')
    base = photo_like_image(24, 32, np.random.default_rng(3))[..., ::-1].copy()
    reference = Compose([dict(type='mmpretrain.RandAugment', **RECIPE),
                         dict(type='mmpretrain.RandomErasing', **ERASING)])
    sample = Compose([SampleRandAugment(**RECIPE), SampleRandomErasing(**ERASING)])
    n = 10 ** 4
    np.random.seed(0)
    ref = [_summary(reference(dict(img=base.copy(), img_shape=base.shape[:2]))['img'], base) for _ in range(n)]
    np.random.seed(0)
    drawn = [sample(dict(img_shape=base.shape[:2])) for _ in range(n)]
    torch.manual_seed(0)
    ours = []
    for start in range(0, n, 1000):
        chunk = drawn[start:start + 1000]
        images = tensor(base)[None].expand(len(chunk), -1, -1, -1)
        images = random_erasing(rand_augment(images, [d['rand_augment'] for d in chunk], 'torch'),
                                [d['random_erasing'] for d in chunk])
        ours += [_summary(array(x), base) for x in images]
    ref, ours = np.array(ref), np.array(ours)
    assert not np.array_equal(ref, ours)  # the streams diverged after the first erased image
    for k in range(2):
        assert stats.ks_2samp(ref[:, k], ours[:, k]).pvalue > 1e-3, k
    areas = [d['random_erasing']['box'][2] * d['random_erasing']['box'][3] for d in drawn if d['random_erasing']]
    assert 0.22 < len(areas) / n < 0.28


@pytest.fixture(scope='module')
def photo_files(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp('photos')
    rng = np.random.default_rng(0)
    paths = []
    for i, (h, w) in enumerate(((375, 500), (500, 375), (300, 420))):
        paths.append(str(folder / f'photo_{i}.jpg'))
        Image.fromarray(photo_like_image(h, w, rng)).save(paths[-1], quality=90)
    return paths


def _batch(pipeline: Compose, paths: list[str], seeds: range) -> dict:
    samples = []
    for seed in seeds:
        np.random.seed(seed)
        samples.append(pipeline(dict(img_path=paths[seed % len(paths)], gt_label=seed % 3)))
    return dict(inputs=torch.stack([s['inputs'] for s in samples]), data_samples=[s['data_samples'] for s in samples])


def test_recipe_config_batch_equals_the_exact_pipeline(photo_files):
    """The BEiT fine-tuning config's train pipeline (draft crop, RandAugment and erasing drawn) through its
    ``AugmentClsDataPreprocessor`` on the CPU against its ``train_pipeline_exact`` through mmpretrain's
    ``ClsDataPreprocessor``, 24 seeds: the normalized images equal, outside the erased boxes."""
    cfg = Config.fromfile(FT_CONFIG)
    init_default_scope('mmpretrain')
    import beit_mm  # noqa: F401
    new, exact = Compose(cfg.train_pipeline), Compose(cfg.train_pipeline_exact)
    args = {k: v for k, v in cfg.model.data_preprocessor.items() if k != 'type'}
    from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor
    ours = AugmentClsDataPreprocessor(**args)(_batch(new, photo_files, range(24)))
    theirs = ClsDataPreprocessor(**args)(_batch(exact, photo_files, range(24)))
    outside = torch.ones(ours['inputs'].shape[0], 1, *ours['inputs'].shape[2:], dtype=torch.bool)
    for i, s in enumerate(ours['data_samples']):
        if s.random_erasing is not None:
            top, left, h, w = s.random_erasing['box']
            outside[i, :, top:top + h, left:left + w] = False
    assert outside.all(dim=(1, 2, 3)).sum() < 24  # some images were erased
    assert sum(len(s.rand_augment) for s in ours['data_samples']) >= 12
    assert torch.equal(ours['inputs'] * outside, theirs['inputs'] * outside)
    # the preprocessor on the CPU takes mmcv's calls; the tensor ops (a GPU's path) give the same batch
    batch = _batch(new, photo_files, range(24))
    ops = [s.rand_augment for s in batch['data_samples']]
    assert torch.equal(rand_augment(batch['inputs'], ops, 'torch'), rand_augment(batch['inputs'], ops, 'opencv'))


def test_preprocessor_refuses_a_half_augmented_batch():
    args = dict(num_classes=3, mean=[0, 0, 0], std=[1, 1, 1])
    images = torch.zeros(2, 3, 8, 8, dtype=torch.uint8)
    samples = [DataSample(), DataSample()]
    samples[0].set_metainfo(dict(rand_augment=[]))
    with pytest.raises(ValueError, match='some samples of the batch carry a rand_augment'):
        AugmentClsDataPreprocessor(**args)(dict(inputs=images, data_samples=samples))
    plain = AugmentClsDataPreprocessor(**args)(dict(inputs=images, data_samples=[DataSample(), DataSample()]))
    assert plain['inputs'].shape == (2, 3, 8, 8)


def test_sample_refuses_what_it_cannot_apply():
    with pytest.raises(ValueError, match="interpolation='bilinear'"):
        SampleRandAugment(**dict(RECIPE, hparams=dict(pad_val=128, interpolation='bilinear')))
    with pytest.raises(ValueError, match='no device-side'):
        SampleRandAugment(policies=[dict(type='Cutout', shape=8)], num_policies=1, magnitude_level=9)


def test_gpu_decode_pipeline_draws_equal_the_draft_pipeline(photo_files):
    """The fine-tuning config's GPU-decode pipeline (``EncodedRandomResizedCrop``: bytes, box, flip) makes the draft
    pipeline's draws in its order: the same crop box, flip, RandAugment ops and erasing box, and the same RNG state
    after, for 30 seeds."""
    cfg = Config.fromfile(FT_CONFIG)
    init_default_scope('mmpretrain')
    draft, gpu = Compose(cfg.train_pipeline[:-1]), Compose(cfg.train_pipeline_gpu_decode[:-1])
    for seed in range(30):
        path = photo_files[seed % len(photo_files)]
        np.random.seed(seed)
        a = draft(dict(img_path=path))
        state = np.random.get_state()[1].copy()
        np.random.seed(seed)
        b = gpu(dict(img_path=path))
        assert (np.random.get_state()[1] == state).all()
        assert (b['crop_bbox'], b['flip'], b['rand_augment'], b['random_erasing']) == (
            tuple(a['crop_bbox']), a['flip'], a['rand_augment'], a['random_erasing'])
        assert b['img'].ndim == 1 and b['ori_shape'] == a['ori_shape']  # the worker read bytes, decoded nothing


def test_gpu_decode_batch_close_to_the_exact_pipeline(photo_files):
    """The GPU-decode pipeline through ``AugmentClsDataPreprocessor`` on the CPU against ``train_pipeline_exact``
    through ``ClsDataPreprocessor``, 24 seeds, outside the erased boxes: at least 60% equal, <= 0.5 levels mean, <= 16
    pixels."""
    from mmengine.dataset import pseudo_collate
    from mmpretrain.models.utils.data_preprocessor import ClsDataPreprocessor
    cfg = Config.fromfile(FT_CONFIG)
    init_default_scope('mmpretrain')
    gpu, exact = Compose(cfg.train_pipeline_gpu_decode), Compose(cfg.train_pipeline_exact)
    args = {k: v for k, v in cfg.model.data_preprocessor.items() if k != 'type'}
    samples = []
    for seed in range(24):
        np.random.seed(seed)
        samples.append(gpu(dict(img_path=photo_files[seed % len(photo_files)], gt_label=0)))
    ours = AugmentClsDataPreprocessor(**args)(pseudo_collate(samples))
    theirs = ClsDataPreprocessor(**args)(_batch(exact, photo_files, range(24)))
    std = torch.tensor(args['std']).view(1, 3, 1, 1)
    diff = ((ours['inputs'] - theirs['inputs']) * std).abs().round()
    equal = 0
    for i, s in enumerate(ours['data_samples']):
        d = diff[i]
        if s.random_erasing is not None:
            top, left, h, w = s.random_erasing['box']
            d = d.clone()
            d[:, top:top + h, left:left + w] = 0
        assert d.mean() <= 0.5 and d.max() <= 16, (i, d.mean(), d.max())
        equal += bool(d.max() == 0)
    assert equal >= 0.6 * 24, equal


def test_gpu_decode_preprocessor_refuses_stacked_inputs_and_a_lying_header(photo_files):
    cfg = Config.fromfile(FT_CONFIG)
    init_default_scope('mmpretrain')
    from mmengine.dataset import pseudo_collate
    np.random.seed(0)
    sample = Compose(cfg.train_pipeline_gpu_decode)(dict(img_path=photo_files[0], gt_label=0))
    args = {k: v for k, v in cfg.model.data_preprocessor.items() if k != 'type'}
    batch = pseudo_collate([sample])
    with pytest.raises(ValueError, match='pseudo_collate'):
        AugmentClsDataPreprocessor(**args)(dict(batch, inputs=batch['inputs'][0][None]))
    sample['data_samples'].set_metainfo(dict(ori_shape=(10, 10)))
    with pytest.raises(ValueError, match='header declared'):
        AugmentClsDataPreprocessor(**args)(pseudo_collate([sample]))


@pytest.mark.parametrize('kind', ['draft', 'gpu_decode'])
def test_cvt_demo_trains_with_the_device_augmentation(kind, tmp_path):
    """The CvT-13 demo with the recipe's draft or GPU-decode train pipeline and ``AugmentClsDataPreprocessor``: 3
    iterations through ``beit_mm.apis.train.train`` in this process."""
    import re

    from beit_mm.apis.train import train
    from beit_mm.data.demo.imagenet import make_demo_imagenet
    config = 'configs/demo/cvt-13-tiny_1xb32-30e_in1k-demo-64px.py'
    recipe = Config.fromfile('configs/_base_/datasets/imagenet_bs256_cvt_224.py')
    pipeline = recipe.train_pipeline if kind == 'draft' else recipe.train_pipeline_gpu_decode
    pipeline[0].update(scale=64)
    root = make_demo_imagenet(str(tmp_path / 'imagenet'), num_classes=5, per_class_train=2, per_class_val=1)
    options = {'data_preprocessor.type': 'beit_mm.AugmentClsDataPreprocessor',
               'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
               'train_dataloader.batch_size': 4, 'train_dataloader.dataset.pipeline': pipeline,
               'train_dataloader.dataset.data_root': root, 'val_dataloader.dataset.data_root': root,
               'train_cfg.max_epochs': 1, 'train_cfg.val_interval': 10, 'default_hooks.logger.interval': 1}
    if kind == 'gpu_decode':
        options['train_dataloader.collate_fn'] = dict(type='pseudo_collate')
    train(config, work_dir=str(tmp_path / 'work'), cfg_options=options)
    log = next((tmp_path / 'work').rglob('*.log')).read_text()
    assert re.search(r'Epoch\(train\)\s+\[1\]\[3/3\].*loss: \d', log), log[-2000:]  # 10 images, batch 4
    dumped = next((tmp_path / 'work').rglob('*.py')).read_text()
    assert 'AugmentClsDataPreprocessor' in dumped and 'SampleRandAugment' in dumped
