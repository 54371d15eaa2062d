"""Your own semantic dataset: ``CustomSegDataset`` reads ``classes.txt``/``palette.txt`` from its root, every bad input
gets one named message (files, problem, fix) before training, and the custom demo trains and tests through the tools."""
import os
import os.path as osp
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from PIL import Image

from beit_mm.apis.testing import run_test
from beit_mm.data.checks import DatasetCheckError, check_seg_dataset, check_split_folders
from beit_mm.data.datasets.custom import CustomSegDataset
from beit_mm.data.demo.custom import CUSTOM_DEMO_CLASSES, custom_demo_files, make_demo_custom
from beit_mm.data.demo.root import NotADemoRootError
from beit_mm.fileio.outputs import OutputError, check_output

from ..conftest import ROOT, run_tool

CONFIG = osp.join(ROOT, 'configs', 'demo', 'beit-tiny-p8_upernet_1xb8-1k_custom-demo-64x64.py')
NAMES = ('sky', 'grass', 'car')
NUM_TRAIN, NUM_VAL, SIZE = 6, 2, 64
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')


@pytest.fixture(scope='module')
def clean_root(tmp_path_factory) -> str:
    return make_demo_custom(str(tmp_path_factory.mktemp('custom') / 'clean'), NUM_TRAIN, NUM_VAL, SIZE, seed=0)


@pytest.fixture
def root(clean_root, tmp_path) -> str:
    copy = str(tmp_path / 'custom')
    shutil.copytree(clean_root, copy)
    return copy


def _dataset(root: str, split: str = 'train') -> CustomSegDataset:
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    return DATASETS.build(dict(
        type='beit_mm.CustomSegDataset', data_root=root,
        data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'masks/{split}'),
        pipeline=[dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]))


def _pairs(root: str, split: str = 'train') -> list[tuple[str, str]]:
    return [(osp.join(root, i), osp.join(root, m)) for i, m in custom_demo_files(NUM_TRAIN, NUM_VAL, 0)[split]]


def _error(root: str) -> str:
    with pytest.raises(DatasetCheckError) as info:
        check_seg_dataset(_dataset(root), 'train')
    return str(info.value)


def test_demo_layout_random_stems_and_three_named_classes(clean_root):
    assert open(osp.join(clean_root, 'classes.txt')).read() == 'sky\ngrass\ncar\n'
    for split, count in (('train', NUM_TRAIN), ('val', NUM_VAL)):
        images = sorted(os.listdir(osp.join(clean_root, 'images', split)))
        masks = sorted(os.listdir(osp.join(clean_root, 'masks', split)))
        assert len(images) == len(masks) == count
        assert sorted(osp.splitext(i)[0] for i in images) == sorted(osp.splitext(m)[0] for m in masks)
        assert all(re.fullmatch(r'[0-9a-f]{12}\.(jpg|png)', name) for name in images), images
    stems = [osp.splitext(n)[0] for n in os.listdir(osp.join(clean_root, 'images', 'train'))]
    assert len({s[:3] for s in stems}) > 1, 'stems must not share a pattern'
    values = set()
    for _, mask in _pairs(clean_root):
        values |= set(np.unique(np.asarray(Image.open(mask))).tolist())
    assert {0, 1, 2} <= values <= {0, 1, 2, 255}


def test_demo_generator_owns_its_root(clean_root, tmp_path):
    """Same arguments: nothing rewritten; a foreign folder: refused before anything is written."""
    mask = _pairs(clean_root)[0][1]
    before = os.stat(mask).st_mtime_ns
    make_demo_custom(clean_root, NUM_TRAIN, NUM_VAL, SIZE, seed=0)
    assert os.stat(mask).st_mtime_ns == before
    foreign = tmp_path / 'mine'
    foreign.mkdir()
    (foreign / 'notes.txt').write_text('keep me')
    with pytest.raises(NotADemoRootError, match='is not a demo root'):
        make_demo_custom(str(foreign), NUM_TRAIN, NUM_VAL, SIZE)
    assert os.listdir(foreign) == ['notes.txt']


def test_dataset_reads_classes_and_palette(clean_root):
    from beit_mm.registry import DATASETS
    assert DATASETS.get('CustomSegDataset') is CustomSegDataset  # registry name = class name
    dataset = _dataset(clean_root)
    assert dataset.metainfo['classes'] == NAMES
    assert dataset.metainfo['palette'] == [list(CUSTOM_DEMO_CLASSES[v][1]) for v in range(3)]
    assert dataset.reduce_zero_label is False and len(dataset) == NUM_TRAIN
    assert dataset.classes_path == osp.join(clean_root, 'classes.txt')
    # .jpg and .png images, each paired with the mask of its stem
    listed = sorted((dataset.get_data_info(i)['img_path'], dataset.get_data_info(i)['seg_map_path'])
                    for i in range(len(dataset)))
    assert listed == sorted(_pairs(clean_root))
    assert {osp.splitext(p)[1] for p, _ in listed} == {'.jpg', '.png'}


def test_dataset_without_palette_and_with_trailing_blank_lines(root):
    os.remove(osp.join(root, 'palette.txt'))
    with open(osp.join(root, 'classes.txt'), 'w') as f:
        f.write('\ufeffsky\r\ngrass  \r\ncar\r\n\r\n')  # a BOM, CRLF, trailing spaces and a blank last line
    dataset = _dataset(root)
    assert dataset.metainfo['classes'] == NAMES and len(dataset.metainfo['palette']) == 3


@pytest.mark.parametrize('case,content,message', [
    ('missing', None, r'classes\.txt does not exist: the dataset reads its class names from it\. Fix: write '),
    ('empty', '\n\n', r'classes\.txt lists no class names \(the file is empty\)\. Fix: write .* one class name per '
                      r'line'),
    ('blank', 'sky\n\ngrass\ncar\n', r'classes\.txt has blank line\(s\) among the class names: line\(s\) \[2\]; .*'
                                     r'shift every class after it by one\. Fix: '),
    ('duplicate', 'sky\ngrass\nsky\n', r"classes\.txt names a class twice: 'sky' on lines 1 and 3\. .* Fix: give "
                                       r'every mask value its own name'),
    ('palette_count', None, r'palette\.txt has 2 colour\(s\) but 3 classes are listed in .*classes\.txt\. Fix: one '
                            r'"R G B" line per class'),
    ('palette_value', None, r'palette\.txt has line\(s\) that are not an "R G B" triple of integers 0\.\.255: line 2: '
                            r"'0 300 0'\. Fix: "),
])
def test_class_files_are_checked_when_the_dataset_is_built(root, case, content, message):
    classes = osp.join(root, 'classes.txt')
    if case == 'missing':
        os.remove(classes)
    elif content is not None:
        with open(classes, 'w') as f:
            f.write(content)
    elif case == 'palette_count':
        with open(osp.join(root, 'palette.txt'), 'w') as f:
            f.write('1 2 3\n4 5 6\n')
    else:
        with open(osp.join(root, 'palette.txt'), 'w') as f:
            f.write('1 2 3\n0 300 0\n7 8 9\n')
    with pytest.raises(DatasetCheckError, match=message) as info:
        _dataset(root)
    assert root in str(info.value)  # the file is named by its path


def test_class_file_that_is_not_text(root):
    """Read through the file room's bounded text reader: a Latin-1 file is named, not decoded into wrong names."""
    with open(osp.join(root, 'classes.txt'), 'wb') as f:
        f.write('sky\ngr\u00e4s\ncar\n'.encode('latin-1'))
    with pytest.raises(DatasetCheckError, match=r'classes\.txt is not UTF-8 text \(invalid continuation byte at byte '
                       r'6\)\. Fix: save it as UTF-8 text \(the class names of the dataset\)'):
        _dataset(root)


def test_clean_custom_data_passes(clean_root):
    assert check_seg_dataset(_dataset(clean_root), 'train') == NUM_TRAIN
    assert check_seg_dataset(_dataset(clean_root, 'val'), 'val') == NUM_VAL


def test_mask_values_outside_the_classes(root):
    """A value 3 with three classes (0..2) and 255 ignored; the fix names classes.txt (the old fix said 'the dataset
    metainfo')."""
    mask = _pairs(root)[1][1]
    labels = np.asarray(Image.open(mask)).copy()
    labels[:4, :4] = 3
    Image.fromarray(labels).save(mask)
    message = _error(root)
    assert (f'[train] 1 annotation(s) with label values outside 0..2 (reduce_zero_label=False) or the ignore index '
            f'255: {mask} (values [3]). Fix: check the annotation conversion, the class count (3 in '
            f'{osp.join(root, "classes.txt")} and decode_head.num_classes)') in message


def test_image_without_mask_and_mask_without_image(root):
    (img, mask), (img2, mask2) = _pairs(root)[:2]
    os.remove(mask)
    os.remove(img2)
    message = _error(root)
    assert (f'[train] 1 image(s) without an annotation file: {img} (expected {mask}). Fix: add the annotations, '
            'delete the images') in message
    assert f'[train] 1 annotation file(s) without an image: {mask2}. Fix: add the images' in message


def test_image_and_mask_of_different_sizes(root):
    _, mask = _pairs(root)[2]
    Image.open(mask).resize((SIZE, SIZE // 2), Image.NEAREST).save(mask)
    message = _error(root)
    assert (f'[train] 1 image/annotation pair(s) of different sizes: {mask} (annotation {SIZE}x{SIZE // 2}, image '
            f'{SIZE}x{SIZE}). Fix: annotations must have their image\'s size') in message


def test_two_images_of_one_stem(root):
    """a.jpg and a.png would both train on a.png's labels (new check)."""
    img, mask = _pairs(root)[0]
    twin = osp.splitext(img)[0] + ('.png' if img.endswith('.jpg') else '.jpg')
    Image.open(img).convert('RGB').save(twin)
    message = _error(root)
    first, second = sorted((img, twin))
    assert (f'[train] 1 image(s) sharing their annotation with another image of the same name and another suffix: '
            f'{second} (and {osp.basename(first)} -> {mask}). Fix: keep one image per name') in message


def test_empty_split_names_every_suffix(root):
    cfg = Config.fromfile(CONFIG)
    for dl in LOADERS:
        cfg[dl].dataset.data_root = root
    check_split_folders(cfg)
    for img, _ in _pairs(root):
        os.rename(img, img + '.bak')
    with pytest.raises(DatasetCheckError, match=r'\[train_dataloader\] the split is empty: no image matched '
                       rf'{re.escape(osp.join(root, "images", "train"))}/\*\*/\*\{{\.jpg,\.jpeg,\.png,.*\}}\. Fix: '):
        check_split_folders(cfg)


def _runner(root: str, work_dir: str, **model) -> Runner:
    cfg = Config.fromfile(CONFIG)
    for dl in LOADERS:
        cfg[dl].dataset.data_root = root
        cfg[dl].num_workers, cfg[dl].persistent_workers = 0, False
    cfg.train_dataloader.batch_size = 2
    cfg.merge_from_dict({f'model.{k}': v for k, v in model.items()})
    cfg.work_dir = work_dir
    cfg.train_cfg.max_iters = 2
    cfg.visualizer.pop('name')  # named after the runner then: a second runner in this process gets its own
    return Runner.from_cfg(cfg)


@pytest.mark.parametrize('heads,named', [
    ({'decode_head.num_classes': 150, 'auxiliary_head.num_classes': 150},
     'decode_head.num_classes=150, auxiliary_head.num_classes=150'),
    ({'auxiliary_head.num_classes': 150}, 'auxiliary_head.num_classes=150'),  # trained silently before
])
def test_heads_must_predict_the_classes_of_classes_txt(clean_root, tmp_path, heads, named):
    runner = _runner(clean_root, str(tmp_path / 'work'), **heads)
    with pytest.raises(DatasetCheckError) as info:
        runner.train()
    classes = osp.join(clean_root, 'classes.txt')
    assert str(info.value) == (
        f'{named} but the training set has 3 classes ({classes} lists 3). Fix: --cfg-options '
        'model.decode_head.num_classes=3 model.auxiliary_head.num_classes=3 (or set them in the config), or list the '
        f'150 classes the model predicts in {classes}')
    assert runner.iter == 0


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return run_tool(args)


def _data_root_options(root: str) -> list[str]:
    return [f'{dl}.dataset.data_root={root}' for dl in LOADERS]


def test_check_dataset_tool(root):
    tool = 'tools/analysis/check_dataset.py'
    proc = _run([tool, CONFIG, '--cfg-options', *_data_root_options(root)])
    assert proc.returncode == 0 and proc.stdout.strip().endswith('OK'), proc.stdout + proc.stderr
    assert f'train: {NUM_TRAIN} images under {osp.join(root, "images")}' in proc.stdout
    _, mask = _pairs(root)[3]
    os.remove(mask)
    proc = _run([tool, CONFIG, '--cfg-options', *_data_root_options(root), 'model.decode_head.num_classes=4'])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert '[train] 1 image(s) without an annotation file' in proc.stdout and mask in proc.stdout
    assert 'decode_head.num_classes=4 but the training set has 3 classes' in proc.stdout
    with open(osp.join(root, 'classes.txt'), 'w') as f:
        f.write('sky\ngrass\ngrass\n')
    proc = _run([tool, CONFIG, '--cfg-options', *_data_root_options(root)])
    assert proc.returncode == 1 and "names a class twice: 'grass' on lines 2 and 3" in proc.stdout, proc.stdout


def test_a_custom_root_is_a_dataset_root_for_outputs(clean_root, tmp_path):
    plain = tmp_path / 'plain'  # the layout without the demo marker
    for folder in ('images/train', 'masks/train'):
        (plain / folder).mkdir(parents=True)
    with pytest.raises(OutputError, match=r'lies inside the dataset root .*plain \(it holds images/ and masks/\)'):
        check_output(str(plain / 'work'), kind='dir')


def test_make_train_test_end_to_end(tmp_path, capsys):
    """make_demo_data --layout custom -> tools/train.py (4 iterations, data_root by --cfg-options) -> tools/test.py
    (in-process, :func:`beit_mm.apis.testing.run_test`) printing mIoU and the per-class table with the three names of classes.txt."""
    root, work = str(tmp_path / 'my_set'), str(tmp_path / 'work')
    proc = _run(['tools/make_demo_data.py', '--layout', 'custom', '--root', root, '--num-train', '8', '--num-val',
                 '2', '--size', '64'])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f'{root}: custom layout, classes sky, grass, car; label share 0 sky:' in proc.stdout
    short = ['train_cfg.max_iters=4', 'train_cfg.val_interval=4', 'default_hooks.checkpoint.interval=4',
             'default_hooks.logger.interval=2', 'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0',
             'train_dataloader.persistent_workers=False', 'val_dataloader.num_workers=0',
             'val_dataloader.persistent_workers=False', 'test_dataloader.num_workers=0',
             'test_dataloader.persistent_workers=False']
    proc = _run(['tools/train.py', CONFIG, '--work-dir', work, '--cfg-options', *_data_root_options(root), *short])
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert 'dataset check passed: train, val' in proc.stdout + proc.stderr
    options = dict(option.split('=', 1) for option in _data_root_options(root))
    result = run_test(CONFIG, osp.join(work, 'iter_4.pth'), work_dir=osp.join(work, 'test'),
                      cfg_options={**options, 'test_dataloader.num_workers': 0,
                                   'test_dataloader.persistent_workers': False})
    log = capsys.readouterr().out
    assert 'mIoU' in result['metrics'] and re.search(r'mIoU: [\d.]+', log), log[-3000:]
    table = log[log.index('per class results'):]
    for name in NAMES:
        assert re.search(rf'\|\s+{name}\s+\|\s+[\d.]+\s+\|', table), table[:1500]


def test_a_top_level_data_root_that_no_dataset_reads_is_named(clean_root):
    """``--cfg-options data_root=X`` sets the variable after the config copied it into the datasets: the run would read
    data/custom_demo. The warning names the three options that do set the root."""
    from beit_mm.data.checks import warn_unread_data_root
    cfg = Config.fromfile(CONFIG)
    assert warn_unread_data_root(cfg) is None
    cfg.merge_from_dict({'data_root': clean_root})
    message = warn_unread_data_root(cfg)
    assert message == (f"the config's data_root={clean_root!r} is read by none of its datasets, which read "
                       "['data/custom_demo']: --cfg-options data_root=... only sets that variable, after the config "
                       "copied it into the datasets. Fix: set the datasets' roots, --cfg-options "
                       + ' '.join(f'{dl}.dataset.data_root={clean_root}' for dl in LOADERS))
    cfg.merge_from_dict({f'{dl}.dataset.data_root': clean_root for dl in LOADERS})
    assert warn_unread_data_root(cfg) is None


def test_one_line_base_swap_puts_a_full_size_config_on_the_custom_layout(clean_root, tmp_path):
    """configs/_base_/datasets/custom.py in place of ade20k_512x512.py: the datasets read the custom layout with
    reduce_zero_label=False everywhere, and build on a custom root."""
    src = osp.join(ROOT, 'configs', 'beit', 'beit-base_upernet_8xb2-160k_ade20k-512x512.py')
    text = open(src).read()
    assert "'../_base_/datasets/ade20k_512x512.py'" in text
    text = text.replace('ade20k_512x512.py', 'custom.py').replace("'../_base_/", f"'{ROOT}/configs/_base_/")
    (tmp_path / 'swapped.py').write_text(text)
    cfg = Config.fromfile(str(tmp_path / 'swapped.py'))
    for dl, split in zip(LOADERS, ('train', 'val', 'val')):
        ds = cfg[dl].dataset
        assert ds.type == 'beit_mm.CustomSegDataset' and ds.data_root == 'data/custom'
        assert dict(ds.data_prefix) == dict(img_path=f'images/{split}', seg_map_path=f'masks/{split}')
        assert [t.reduce_zero_label for t in ds.pipeline if t.type == 'LoadAnnotations'] == [False]
        assert [t.crop_size for t in ds.pipeline if t.type == 'RandomCrop'] in ([(512, 512)], [])
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    dataset = DATASETS.build({**cfg.train_dataloader.dataset, 'data_root': clean_root})
    assert dataset.metainfo['classes'] == NAMES and len(dataset) == NUM_TRAIN
