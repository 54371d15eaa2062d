"""Every bad segmentation input gets a named error before training naming the files, the count and the fix; the hook
stops the run before the first iteration, and a bad file outside the sample at the iteration that loads it."""
import logging
import os
import os.path as osp
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from PIL import Image

from beit_mm.data.checks import (EXIF_ORIENTATION, DatasetCheckError, check_seg_dataset, check_split,
                                 check_split_folders, loader_applies_orientation, sample_indices, split_info)
from beit_mm.data.demo.ade20k import make_demo_ade20k

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
NUM_TRAIN, NUM_VAL = 6, 2


@pytest.fixture(scope='module')
def clean_root(tmp_path_factory) -> str:
    return make_demo_ade20k(str(tmp_path_factory.mktemp('ade') / 'clean'), NUM_TRAIN, NUM_VAL, size=64, seed=0)


@pytest.fixture
def root(clean_root, tmp_path) -> str:
    copy = str(tmp_path / 'ade')
    shutil.copytree(clean_root, copy)
    return copy


def _img(root: str, i: int = 1, split: str = 'training') -> str:
    prefix = 'train' if split == 'training' else 'val'
    return osp.join(root, 'images', split, f'ADE_{prefix}_{i:08d}.jpg')


def _ann(root: str, i: int = 1, split: str = 'training') -> str:
    prefix = 'train' if split == 'training' else 'val'
    return osp.join(root, 'annotations', split, f'ADE_{prefix}_{i:08d}.png')


def _dataset(root: str, split: str = 'training', reduce_zero_label: bool = True):
    from mmseg.datasets import ADE20KDataset
    init_default_scope('mmseg')
    return ADE20KDataset(
        data_root=root, data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}'),
        reduce_zero_label=reduce_zero_label,
        pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', reduce_zero_label=reduce_zero_label)])


def _error(root: str, **kwargs) -> str:
    with pytest.raises(DatasetCheckError) as info:
        check_seg_dataset(_dataset(root, **kwargs), 'train')
    return str(info.value)


def _write_mask(path: str, mask: np.ndarray) -> None:
    Image.fromarray(mask).save(path)


def test_clean_demo_data_passes(root):
    assert check_seg_dataset(_dataset(root), 'train') == NUM_TRAIN
    assert check_seg_dataset(_dataset(root, 'validation'), 'val') == NUM_VAL


def test_labels_above_the_class_range(root):
    """The issue's first case: a raw label 200 (-> 199 after reduce_zero_label) in two files."""
    for i in (2, 5):
        mask = np.asarray(Image.open(_ann(root, i))).copy()
        mask[:4, :4] = 200
        _write_mask(_ann(root, i), mask)
    message = _error(root)
    assert '2 annotation(s) with label values outside 0..150' in message
    assert _ann(root, 2) in message and _ann(root, 5) in message and 'values [200]' in message
    assert 'Fix: check the annotation conversion, the class count (150' in message


def test_image_without_annotation(root):
    os.remove(_ann(root, 3))
    message = _error(root)
    assert '1 image(s) without an annotation file' in message and _img(root, 3) in message
    assert f'expected {_ann(root, 3)}' in message and 'Fix: add the annotations, delete the images' in message


def test_annotation_without_image(root):
    os.remove(_img(root, 4))
    message = _error(root)
    assert '1 annotation file(s) without an image' in message and _ann(root, 4) in message
    assert 'Fix: add the images, delete the annotations' in message


def test_subset_with_indices_is_not_an_orphan_error(root):
    """``indices=N`` (the MIM study's ``--num-labeled``) keeps the first N pairs: the other annotations are not
    orphans; a bad label inside the subset is still found."""
    dataset = _dataset(root)
    subset = type(dataset)(data_root=root, data_prefix=dataset.data_prefix, reduce_zero_label=True, indices=3,
                           pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')])
    assert check_seg_dataset(subset, 'train') == 3
    mask = np.asarray(Image.open(_ann(root, 2))).copy()
    mask[:4, :4] = 200
    _write_mask(_ann(root, 2), mask)
    with pytest.raises(DatasetCheckError, match=r'1 annotation\(s\) with label values outside 0..150'):
        check_seg_dataset(subset, 'train')


@pytest.mark.parametrize('damage', ['truncated', 'not_an_image'])
def test_unreadable_or_truncated_image(root, damage):
    path = _img(root, 2)
    data = open(path, 'rb').read()
    with open(path, 'wb') as f:
        f.write(data[:len(data) // 2] if damage == 'truncated' else b'<html>404 Not Found</html>')
    message = _error(root)
    assert "1 file(s) that cannot be decoded (not an image, or truncated)" in message and path in message
    assert ('truncated' in message) if damage == 'truncated' else ('cannot identify image file' in message)
    assert 'Fix: re-download or re-encode them' in message


def test_truncated_annotation(root):
    data = open(_ann(root, 6), 'rb').read()
    with open(_ann(root, 6), 'wb') as f:
        f.write(data[:len(data) // 2])
    message = _error(root)
    assert 'cannot be decoded' in message and _ann(root, 6) in message


def test_size_mismatch(root):
    mask = Image.open(_ann(root, 1))
    mask.resize((32, 64), Image.NEAREST).save(_ann(root, 1))
    message = _error(root)
    assert '1 image/annotation pair(s) of different sizes' in message
    assert f'{_ann(root, 1)} (annotation 32x64, image 64x64)' in message and 'nearest-neighbour' in message


def test_masks_stored_as_0_255(root):
    binary = []
    for i in range(1, NUM_TRAIN + 1):
        mask = np.asarray(Image.open(_ann(root, i)))
        _write_mask(_ann(root, i), np.where(mask == 1, 255, 0).astype(np.uint8))  # "wall" as a binary mask
        binary += [_ann(root, i)] if (mask == 1).any() else []
    assert len(binary) >= 3, 'the demo set has walls in several images'
    message = _error(root)
    assert f'{len(binary)} annotation(s) holding only 0 and 255, binary masks' in message and binary[0] in message
    assert 'Fix: store class indices' in message
    # with reduce_zero_label=False, 0/255 is legal per file (class 0 + ignore), binary only if every map is
    assert f'{len(binary)} annotation(s) holding only 0 and 255' in _error(root, reduce_zero_label=False)
    _write_mask(_ann(root, 1), np.full((64, 64), 3, np.uint8))  # one real class map: no longer all binary
    assert check_seg_dataset(_dataset(root, reduce_zero_label=False), 'train') == NUM_TRAIN


def test_masks_reduced_twice(root):
    """Certain only when both marks of raw masks are missing: reduced offline (0 -> 255, k -> k - 1), no 0 left
    anywhere and 149 = num_classes - 1 the largest value (here: a set without raw class 1, with raw class 150)."""
    for i in range(1, NUM_TRAIN + 1):
        raw = np.asarray(Image.open(_ann(root, i))).copy()
        raw[raw == 1] = 150
        _write_mask(_ann(root, i), np.where(raw == 0, 255, raw - 1).astype(np.uint8))  # reduced offline
    with_255 = [i for i in range(1, NUM_TRAIN + 1) if 255 in np.asarray(Image.open(_ann(root, i)))]
    assert with_255, 'the demo masks have "other" pixels in some images'
    message = _error(root)
    assert (f'{len(with_255)} annotation(s) containing 255 beside class values, while no decoded annotation holds 0 '
            'and 149 is the largest class value: they are already reduced') in message
    assert _ann(root, with_255[0]) in message
    assert 'Fix: use the raw masks, or set reduce_zero_label=False' in message


def test_void_pixels_are_a_warning_once(root):
    """255 beside raw class values (0 = "other" still present): void pixels, which mmseg ignores; one warning per split
    that says so, and no error."""
    for i in (2, 4):
        mask = np.asarray(Image.open(_ann(root, i))).copy()
        mask[:, :2] = 255  # a void border
        _write_mask(_ann(root, i), mask)
    dataset = _dataset(root)
    errors, warnings = check_split(split_info(dataset, 'train'))
    assert errors == [] and len(warnings) == 1
    assert warnings[0].startswith(f'[train] 2 annotation(s) hold 255 beside class values ({_ann(root, 2)}, '
                                  f'{_ann(root, 4)}). With reduce_zero_label=True mmseg keeps a raw 255 as 255 '
                                  '(ignored')
    assert 'then set reduce_zero_label=False' in warnings[0]
    records = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        assert check_seg_dataset(dataset, 'train') == NUM_TRAIN
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == warnings


def _exif_jpeg(path: str, orientation: int, box: tuple | None = None, seg_path: str | None = None) -> None:
    """Re-save the JPEG ``path`` with an EXIF orientation tag (a phone photo), cropped to ``box`` (and its
    annotation ``seg_path`` with it)."""
    image = Image.open(path)
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    (image.crop(box) if box else image.copy()).save(path, quality=92, exif=exif.tobytes())
    if seg_path is not None:
        Image.open(seg_path).crop(box).save(seg_path)


def test_exif_rotated_portrait_photo(root):
    """The issue's case: stored 64x48 with Orientation=6, annotation 64x48; mmcv's loader turns the image to 48x64."""
    _exif_jpeg(_img(root, 2), 6, (0, 0, 64, 48), _ann(root, 2))
    message = _error(root)
    assert ("1 image(s) with an EXIF orientation tag that mmcv's loader applies, turning them to another size than "
            "their annotation") in message
    assert (f'{_img(root, 2)} (stored 64x48, EXIF orientation 6: rotated 90 degrees clockwise, loaded 48x64; '
            'annotation 64x48)') in message
    assert "Fix: the annotations follow the stored pixels: load the images with LoadImageFromFile(color_type=" \
           "'color_ignore_orientation')" in message
    # the named fix works: a pipeline that ignores the tag passes
    from mmseg.datasets import ADE20KDataset
    ignoring = ADE20KDataset(
        data_root=root, data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        reduce_zero_label=True, pipeline=[dict(type='LoadImageFromFile', color_type='color_ignore_orientation'),
                                          dict(type='LoadAnnotations', reduce_zero_label=True)])
    assert check_seg_dataset(ignoring, 'train') == NUM_TRAIN


@pytest.mark.parametrize('orientation', [6, 3])
def test_exif_tag_on_a_square_image(root, orientation):
    """A square image (or a 180-degree tag on any image) keeps its size, so only the tag tells that the loader turns
    the pixels against the labels."""
    _exif_jpeg(_img(root, 3), orientation)
    message = _error(root)
    assert ("1 image(s) with an EXIF orientation tag that mmcv's loader applies without changing their size") in message
    assert f'{_img(root, 3)} (64x64, EXIF orientation {orientation}: ' in message
    assert 'Fix: re-save the images upright (PIL: ImageOps.exif_transpose(image).save(path)' in message


def test_loader_orientation_rule_matches_mmcv(tmp_path):
    """:func:`loader_applies_orientation` against mmcv's decoder, for every colour type on the cv2 and pillow
    backends (LoadImageFromFile decodes with mmcv.imfrombytes)."""
    import mmcv
    path = str(tmp_path / 'portrait.jpg')
    Image.fromarray(np.zeros((48, 64, 3), np.uint8)).save(path)
    _exif_jpeg(path, 6)
    content = open(path, 'rb').read()
    for backend in ('cv2', 'pillow'):
        for color_type in ('color', 'grayscale', 'unchanged', 'color_ignore_orientation',
                           'grayscale_ignore_orientation'):
            if backend == 'pillow' and color_type.endswith('_ignore_orientation'):
                continue  # mmcv's pillow path does not know these flags
            h, w = mmcv.imfrombytes(content, flag=color_type, backend=backend).shape[:2]
            rotated = (w, h) == (48, 64)
            assert rotated == loader_applies_orientation(color_type, backend), (backend, color_type, (w, h))


def test_annotation_saved_as_jpeg(root):
    """A .png name with JPEG content (quality 50): smeared label values, reported whatever the name."""
    mask = Image.open(_ann(root, 4))
    with open(_ann(root, 4), 'wb') as f:
        mask.convert('L').save(f, format='JPEG', quality=50)
    message = _error(root)
    assert (f'1 annotation(s) holding JPEG data: lossy compression changes label values along every class border: '
            f'{_ann(root, 4)} (JPEG data in a .png file)') in message
    assert 'Fix: export the label maps again losslessly (PNG)' in message


def test_colour_masks(root):
    mask = np.asarray(Image.open(_ann(root, 2)))
    Image.fromarray(np.stack([mask] * 3, -1)).save(_ann(root, 2))
    message = _error(root)
    assert 'not single-channel label maps' in message and f'{_ann(root, 2)} (shape (64, 64, 3))' in message


def test_empty_split_and_missing_folder(root):
    """Caught from the config before the datasets are built (MMEngine's BaseDataset fails inside np.concatenate on an
    empty split): tools/train.py calls check_split_folders first."""
    cfg = Config.fromfile(CONFIG)
    for dl in ('train_dataloader', 'val_dataloader'):
        cfg[dl].dataset.data_root = root
    check_split_folders(cfg)
    for name in os.listdir(osp.join(root, 'images', 'training')):
        os.rename(osp.join(root, 'images', 'training', name),
                  osp.join(root, 'images', 'training', name.replace('.jpg', '.jpeg')))
    with pytest.raises(DatasetCheckError, match=rf"\[train_dataloader\] the split is empty: no image matched "
                       rf"{re.escape(osp.join(root, 'images', 'training'))}/\*\*/\*\.jpg\. Fix: check data_root"):
        check_split_folders(cfg)
    cfg.train_dataloader.dataset.data_root = root + '_typo'
    with pytest.raises(DatasetCheckError, match=r'the image folder .*_typo/images/training does not exist\. Fix: '):
        check_split_folders(cfg)


def test_sample_rule_is_even_and_deterministic():
    assert sample_indices(5, 200) == [0, 1, 2, 3, 4]
    big = sample_indices(20210, 200)
    assert len(big) == 200 and big[0] == 0 and big[-1] == 20209 and big == sample_indices(20210, 200)
    assert max(np.diff(big)) - min(np.diff(big)) <= 1


def _runner(root: str, work_dir: str, **hook) -> Runner:
    cfg = Config.fromfile(CONFIG)
    for dl in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[dl].dataset.data_root = root
    cfg.work_dir = work_dir
    cfg.custom_hooks = [dict(type='beit_mm.SegDatasetCheckHook', **hook), dict(type='beit_mm.NonFiniteLossHook')]
    cfg.train_cfg.val_interval = 100
    return Runner.from_cfg(cfg)


def test_hook_stops_before_the_first_iteration(root, tmp_path):
    mask = np.asarray(Image.open(_ann(root, 4))).copy()
    mask[0, 0] = 200
    _write_mask(_ann(root, 4), mask)
    runner = _runner(root, str(tmp_path / 'work'))
    with pytest.raises(DatasetCheckError, match=re.escape(_ann(root, 4))):
        runner.train()
    assert runner.iter == 0 and not any(f.endswith('.pth') for f in os.listdir(tmp_path / 'work'))


def test_hook_names_the_file_of_a_bad_batch_outside_the_sample(root, tmp_path):
    """num_samples=1 decodes only the first pair; a bad label in another file stops the run at the iteration that
    loads it, naming the file, instead of 'IndexError: Target 199 is out of bounds' inside the loss."""
    for i in range(2, NUM_TRAIN + 1):
        mask = np.asarray(Image.open(_ann(root, i))).copy()
        mask[:, :] = 200  # every pixel, so the random crop keeps it
        _write_mask(_ann(root, i), mask)
    runner = _runner(root, str(tmp_path / 'work'), num_samples=1, check_val=False)
    with pytest.raises(DatasetCheckError, match=r'iteration 1: .*ADE_train_0000000[2-6]\.png has label values \[199\]'
                       r'.*Target 199 is out of bounds'):
        runner.train()


def _damage(root: str, kind: str, i: int) -> None:
    if kind == 'exif_rotated':  # a portrait phone photo whose annotation follows the stored pixels
        _exif_jpeg(_img(root, i), 6, (0, 0, 64, 48), _ann(root, i))
    elif kind == 'exif_square':
        _exif_jpeg(_img(root, i), 8)
    else:  # an annotation with JPEG content under its .png name
        mask = Image.open(_ann(root, i))
        with open(_ann(root, i), 'wb') as f:
            mask.save(f, format='JPEG', quality=50)


@pytest.mark.parametrize('kind', ['exif_rotated', 'exif_square', 'lossy'])
def test_hook_names_a_bad_pair_outside_the_sample(root, tmp_path, kind):
    """num_samples=1 decodes only the first pair; a bad pair among the others stops the run at the first iteration that
    loads one, naming both files and the fix, before the data preprocessor stacks anything."""
    for i in range(2, NUM_TRAIN + 1):
        _damage(root, kind, i)
    what = {'exif_rotated': "EXIF orientation tag that mmcv's loader applies, turning them to another size",
            'exif_square': "EXIF orientation tag that mmcv's loader applies without changing their size",
            'lossy': 'annotation(s) holding JPEG data'}[kind]
    runner = _runner(root, str(tmp_path / 'work'), num_samples=1, check_val=False)
    with pytest.raises(DatasetCheckError) as info:
        runner.train()
    message = str(info.value)
    match = re.match(r'iteration 1: (\S+) / (\S+) \((.*?)\): (.*)\. The start-up check .* Fix: ', message)
    assert match, message
    img, ann, _, text = match.groups()
    # one of the damaged pairs 2..6 (the folder is compared whole: pytest's tmp path may hold any digit)
    assert osp.dirname(img) == osp.dirname(_img(root)) and re.fullmatch(r'ADE_train_0000000[2-6]\.jpg',
                                                                          osp.basename(img))
    assert ann == img.replace('images', 'annotations').replace('.jpg', '.png')
    assert what in text
    if kind == 'exif_rotated':
        runner = _runner(root, str(tmp_path / 'unchecked'), num_samples=1, check_val=False, check_batches=False)
        with pytest.raises(RuntimeError, match='stack expects each tensor to be equal size'):
            runner.train()


def test_hook_reports_a_head_with_the_wrong_class_count(root, tmp_path):
    cfg_runner = _runner(root, str(tmp_path / 'work'))
    cfg_runner.model.decode_head.num_classes = 8  # what a config written for the 8 demo classes would say
    with pytest.raises(DatasetCheckError, match=r'decode_head.num_classes=8 but the training set has 150 classes'):
        cfg_runner.train()


def test_check_dataset_tool(clean_root, root):
    os.remove(_ann(root, 3))
    _exif_jpeg(_img(root, 5), 6)  # square: the tag alone tells
    cmd = [sys.executable, osp.join(ROOT, 'tools', 'analysis', 'check_dataset.py'), CONFIG, '--cfg-options',
           *(f'{dl}.dataset.data_root={root}' for dl in ('train_dataloader', 'val_dataloader'))]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert '[train] 1 image(s) without an annotation file' in proc.stdout and _img(root, 3) in proc.stdout
    assert (f"[train] 1 image(s) with an EXIF orientation tag that mmcv's loader applies without changing their size"
            f' (square images, or a flip or 180-degree tag), so their labels may be turned against the pixels: '
            f'{_img(root, 5)} (64x64, EXIF orientation 6: rotated 90 degrees clockwise)') in proc.stdout
    assert f'{NUM_TRAIN - 1}/{NUM_TRAIN - 1},' in proc.stdout  # mmengine's progress bar over the decoded pairs
    shutil.copy(_ann(root, 2), _ann(root, 3))
    shutil.copy(osp.join(clean_root, 'images', 'training', osp.basename(_img(root, 5))), _img(root, 5))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith('OK'), proc.stdout + proc.stderr
