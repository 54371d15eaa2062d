"""Inputs by invariant: every tensor a file declares is dense, inside its storage and overlaps no other (tied views
aside), a file declares no more bytes than it holds, inputs open only as regular files, every image decoder is held to
one pixel limit read from the header, and a checkpoint's ``dataset_meta`` leaves as plain Python values."""
from __future__ import annotations

import os
import os.path as osp
import struct
import threading
import zipfile
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from beit_mm.apis.segment import infer_images
from beit_mm.apis.segment_io import list_images
from beit_mm.fileio import CheckpointFileError, open_checkpoint

from ..tools.test_tools import CONFIG


def rewrite_pickle(src: str, dst: str, old: bytes, new: bytes) -> str:
    """``src`` saved again as ``dst`` with ``old`` replaced by ``new`` in its ``data.pkl``: a crafted geometry."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, 'w', zipfile.ZIP_STORED) as b:
        for info in a.infolist():
            data = a.read(info)
            if info.filename.endswith('data.pkl'):
                assert old in data
                data = data.replace(old, new)
            b.writestr(info.filename, data)
    return dst


def test_stride0_optimizer_state_is_refused_at_opening(tmp_path):
    """The probe that crashed the fused AdamW kernel (rc 139): ``exp_avg`` of its parameter's shape, strides 0."""
    from mmengine.runner.checkpoint import CheckpointLoader
    one = torch.zeros(1)
    broadcast = torch.empty(0).set_(one.untyped_storage(), 0, (64, 64), (0, 0))
    path = str(tmp_path / 'iter_2.pth')
    torch.save({'state_dict': {'w': torch.zeros(64, 64)}, 'optimizer': {'state': {0: {'exp_avg': broadcast}}}}, path)
    for opener in (open_checkpoint, lambda p: CheckpointLoader.load_checkpoint(p, map_location='cpu')):
        with pytest.raises(CheckpointFileError, match=r'optimizer\.state\.0\.exp_avg of shape \(64, 64\) has strides '
                           r'\(0, 0\).*not dense'):
            opener(path)


def test_tensor_outside_its_storage_is_named(tmp_path):
    good = str(tmp_path / 'good.pth')
    torch.save({'v': torch.zeros(10)[5:]}, good)  # offset 5, 5 elements (pickled as K\x05 K\x05)
    crafted = rewrite_pickle(good, str(tmp_path / 'crafted.pth'), b'K\x05K\x05\x85', b'K\x32K\x05\x85')
    with pytest.raises(CheckpointFileError, match='lies outside its storage'):
        open_checkpoint(crafted)
    assert torch.equal(open_checkpoint(good)['v'], torch.zeros(5))


def test_overlapping_views_are_refused_identical_and_disjoint_ones_load(tmp_path):
    base = torch.arange(10.)
    overlapping = str(tmp_path / 'overlapping.pth')
    torch.save({'a': base[0:6], 'b': base[4:10]}, overlapping)
    with pytest.raises(CheckpointFileError, match='tensors a and b share bytes of one storage without being the same'):
        open_checkpoint(overlapping)
    tied = str(tmp_path / 'tied.pth')  # what torch.save writes for tied weights and split views
    torch.save({'embed': base, 'head': base, 'q': base.view(2, 5)[0], 'k': base.view(2, 5)[1]}, tied)
    with pytest.raises(CheckpointFileError, match='share bytes'):  # q overlaps embed, which is not the same view
        open_checkpoint(tied)
    torch.save({'embed': base, 'head': base}, tied)
    opened = open_checkpoint(tied)
    assert torch.equal(opened['head'], base) and opened['embed'].data_ptr() == opened['head'].data_ptr()
    torch.save({'q': base[:5], 'k': base[5:]}, tied)
    assert torch.equal(open_checkpoint(tied)['k'], base[5:])


def _share_record(path: str, copies: int) -> None:
    """Rewrite the torch.save file ``path`` so that ``copies`` more central-directory entries (``data/1``, ...) point
    at the bytes of record ``data/0``."""
    data = bytearray(open(path, 'rb').read())
    eocd = data.rindex(b'PK\x05\x06')
    count, cd_size, cd_offset = struct.unpack('<HII', data[eocd + 10:eocd + 20])
    central, pos, extra = data[cd_offset:cd_offset + cd_size], 0, b''
    while pos < len(central):
        name_len, extra_len, comment_len = struct.unpack('<HHH', central[pos + 28:pos + 34])
        end = pos + 46 + name_len + extra_len + comment_len
        if central[pos + 46:pos + 46 + name_len].endswith(b'/data/0'):
            for i in range(1, copies + 1):
                entry = bytearray(central[pos:end])
                entry[46 + name_len - 1] = ord(str(i))
                extra += bytes(entry)
        pos = end
    eocd_record = bytearray(data[eocd:])
    struct.pack_into('<HHI', eocd_record, 8, count + copies, count + copies, cd_size + len(extra))
    head = bytes(data[:cd_offset + cd_size]) + extra + bytes(eocd_record)
    with zipfile.ZipFile(path) as archive:
        pickled = archive.read(next(n for n in archive.namelist() if n.endswith('data.pkl')))
    open(path, 'wb').write(head)
    assert pickled.count(b'X\x01\x00\x00\x000') == 1


def test_records_declaring_more_bytes_than_the_file_are_refused_before_loading(tmp_path):
    path = str(tmp_path / 'shared.pth')
    torch.save({'w': torch.zeros(2**14)}, path)  # one 64 KB record
    _share_record(path, 9)
    with zipfile.ZipFile(path) as archive:
        assert len([n for n in archive.namelist() if '/data/' in n]) == 10
    with pytest.raises(CheckpointFileError, match=r'its \d+ records declare \d+ bytes in all, more than the file'):
        open_checkpoint(path)


def test_a_structure_larger_than_its_file_is_refused(tmp_path):
    """One list referenced a thousand times at each of three levels: a few KB of pickle, 10**9 entries to a walker."""
    leaf = ['x' * 100] * 1000
    path = str(tmp_path / 'meta.pth')
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'dataset_meta': {'classes': [[leaf] * 1000] * 1000}}},
               path)
    assert osp.getsize(path) < 20000
    with pytest.raises(CheckpointFileError, match='expands to more than'):
        open_checkpoint(path)


@pytest.fixture
def fifo(tmp_path) -> str:
    path = str(tmp_path / 'pipe.jpg')
    os.mkfifo(path)
    return path


def within(seconds: float, fifo: str | None, call):
    """``call()``'s result (or exception), or a failure if it still runs after ``seconds`` (a ``fifo`` it waits on is
    then opened for writing and closed, which ends the wait, so the test fails instead of hanging)."""
    outcome = {}

    def target():
        try:
            outcome['value'] = call()
        except BaseException as error:  # noqa: BLE001  (handed to the test thread)
            outcome['error'] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive() and fifo is None:
        pytest.fail(f'still running after {seconds} s')
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f'still waiting on the FIFO {fifo} after {seconds} s')
    if 'error' in outcome:
        raise outcome['error']
    return outcome.get('value')


def _openers():
    from mmcv.transforms import LoadImageFromFile
    from mmengine import fileio

    from beit_mm.fileio.checkpoint import load_safetensors
    from beit_mm.fileio.json_file import read_json
    from beit_mm.fileio.inputs import open_image
    from beit_mm.fileio.manifest import file_sha256
    from beit_mm.fileio.text_file import read_text_lines
    return {'open_checkpoint': open_checkpoint, 'load_safetensors': load_safetensors, 'read_json': read_json,
            'read_text_lines': read_text_lines, 'mmengine.fileio.get': fileio.get,
            'LoadImageFromFile': lambda p: LoadImageFromFile()(dict(img_path=p)),
            'file_sha256': file_sha256,  # the manifests' and demo journals' hashes
            'open_image': open_image}  # beit_mm's own image readers (probe, tokenizer evaluation, PQ, visualize.py)


@pytest.mark.parametrize('opener', ['open_checkpoint', 'load_safetensors', 'read_json', 'read_text_lines',
                                    'mmengine.fileio.get', 'LoadImageFromFile', 'file_sha256', 'open_image'])
def test_a_fifo_is_refused_by_every_opener(fifo, opener):
    with pytest.raises(FileNotFoundError, match=r'pipe\.jpg is a FIFO \(named pipe\), not a regular file'):
        within(20, fifo, lambda: _openers()[opener](fifo))


def test_a_fifo_as_the_converters_checkpoint(fifo, tmp_path):
    """``convert_checkpoint(FIFO, ..., model='dalle', source='openai')`` (tools/convert_checkpoint.py's one call)."""
    from beit_mm.apis.convert import ConversionError, convert_checkpoint
    with pytest.raises(ConversionError, match=r'is a FIFO \(named pipe\), not a regular file'):
        within(20, fifo, lambda: convert_checkpoint(fifo, str(tmp_path / 'out.pth'), model='dalle', source='openai'))
    assert not osp.exists(tmp_path / 'out.pth')


def _png(path: str, size: tuple[int, int] = (32, 32)) -> str:
    Image.new('RGB', size, (10, 200, 30)).save(path)
    return path


def test_a_fifo_among_an_input_folders_images(tmp_path):
    images = tmp_path / 'images'
    images.mkdir()
    _png(str(images / 'a.png'))
    os.mkfifo(str(images / 'b.png'))
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    checkpoint = str(tmp_path / 'tiny.pth')
    torch.save({'state_dict': build_from_config(Config.fromfile(CONFIG)).state_dict()}, checkpoint)
    with pytest.raises(FileNotFoundError, match=r'image .*b\.png is a FIFO'):
        within(60, str(images / 'b.png'),
               lambda: infer_images(CONFIG, checkpoint, [str(images)], str(tmp_path / 'out'), device='cpu'))
    assert not osp.exists(tmp_path / 'out' / 'pred')


def _bomb(path: str, width: int, height: int) -> str:
    """A 32x32 PNG whose header (IHDR, its CRC fixed) declares ``width`` x ``height``: a few hundred bytes."""
    data = bytearray(open(_png(path), 'rb').read())
    struct.pack_into('>II', data, 16, width, height)
    struct.pack_into('>I', data, 29, zlib.crc32(bytes(data[12:29])))
    open(path, 'wb').write(bytes(data))
    return path


def test_an_image_over_the_pixel_limit_in_an_input_folder(tmp_path):
    images = tmp_path / 'images'
    images.mkdir()
    _png(str(images / 'a.png'))
    _bomb(str(images / 'b.png'), 12000, 12000)
    assert osp.getsize(images / 'b.png') < 1000
    with pytest.raises(ValueError, match=r'image .*b\.png declares 12000 x 12000 = 144000000 pixels \(PNG\), more than '
                       r'the limit of 89478485 pixels.*BEIT_MM_MAX_IMAGE_PIXELS=144000000'):
        list_images([str(images)])


@pytest.mark.parametrize('backend', ['cv2', 'pillow'])
def test_every_decoder_keeps_the_one_limit(tmp_path, monkeypatch, backend):
    """MMCV's decoders (``imdecode_backend``, OpenCV by default) get the bytes only after the header is checked; the
    documented knob lowers (or raises) the limit for all of them."""
    from mmcv.transforms import LoadImageFromFile
    path = _png(str(tmp_path / 'a.png'))
    load = LoadImageFromFile(imdecode_backend=backend)
    assert load(dict(img_path=path))['img'].shape == (32, 32, 3)
    monkeypatch.setenv('BEIT_MM_MAX_IMAGE_PIXELS', '1000')
    with pytest.raises(ValueError, match=r'a\.png declares 32 x 32 = 1024 pixels \(PNG\), more than the limit of 1000'):
        load(dict(img_path=path))
    monkeypatch.setenv('BEIT_MM_MAX_IMAGE_PIXELS', '1024')
    assert np.array_equal(load(dict(img_path=path))['img'][0, 0], (30, 200, 10))  # BGR, as MMCV loads


def test_dataset_meta_leaves_as_plain_values(tmp_path):
    path = str(tmp_path / 'meta.pth')
    meta = {'classes': ('sky', 'road'), 'palette': torch.tensor([[1, 2, 3], [4, 5, 6]]),
            'reduce_zero_label': np.bool_(True), 'ignore': (np.int64(255), None)}
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'iter': 2, 'dataset_meta': meta}}, path)
    opened = open_checkpoint(path)['meta']
    assert opened['dataset_meta'] == {'classes': ('sky', 'road'), 'palette': [[1, 2, 3], [4, 5, 6]],
                                      'reduce_zero_label': True, 'ignore': (255, None)}
    assert type(opened['dataset_meta']['ignore'][0]) is int and opened['iter'] == 2
    torch.save({'meta': {'dataset_meta': {'classes': torch.float32}}}, path)
    with pytest.raises(CheckpointFileError, match=r'meta\.dataset_meta\.classes holds a dtype; metadata are '
                       'plain values'):
        open_checkpoint(path)


def test_a_fifo_among_a_training_sets_images_is_named_by_the_dataset_check(tmp_path):
    """The check before training (``beit_mm.DatasetCheckHook`` -> ``check_pair``) decodes sampled pairs: a FIFO among
    the images is an unreadable file it names, not a wait."""
    from beit_mm.data.checks import LabelRule, check_pair
    seg = str(tmp_path / 'a.png')
    Image.new('L', (32, 32)).save(seg)
    image = str(tmp_path / 'a.jpg')
    os.mkfifo(image)
    problems, _ = within(20, image, lambda: check_pair(image, seg, LabelRule(num_classes=2, reduce_zero_label=False)))
    assert [(kind, path) for kind, path, _ in problems] == [('unreadable', image)]
    assert 'is a FIFO (named pipe), not a regular file' in problems[0][2]
