"""The bound is kept by the parser that allocates: every hostile file here is built in the test, read differently by
the file room's header parser and by a decoder (or by Python's zipfile and torch's reader), or costs work beyond its
pixels, and is refused by name before a decoder or ``torch.load`` allocates; the decoders that have a pixel limit of
their own refuse past beit_mm's."""
from __future__ import annotations

import io
import os.path as osp
import re
import struct
import subprocess
import sys

import cv2
import numpy as np
import pytest
from PIL import Image

from beit_mm.fileio.images import (MAX_JPEG_SCANS, ImageHeaderError, ImageTooLargeError, ImageWorkError,
                                   check_image_bytes, jpeg_scans)

from ..conftest import ROOT

LIMIT = 10_000  # pixels, for the tests: the hostile images declare 100 pixels to the room and 90,000 to a decoder


def tiff_two_sizes(first: tuple[int, int], last: tuple[int, int]) -> bytes:
    """An uncompressed 8-bit gray TIFF whose ImageWidth and ImageLength tags are each given twice, ``first`` then
    ``last`` ``(width, height)``; the strip holds ``first``'s pixels."""
    (w1, h1), (w2, h2) = first, last
    entries = [(256, 4, w1), (256, 4, w2), (257, 4, h1), (257, 4, h2), (258, 3, 8), (259, 3, 1), (262, 3, 1),
               (273, 4, None), (277, 3, 1), (278, 4, h1), (279, 4, w1 * h1)]
    data_at = 8 + 2 + 12 * len(entries) + 4
    ifd = struct.pack('<H', len(entries))
    for tag, kind, value in entries:
        value = data_at if value is None else value
        ifd += struct.pack('<HHI', tag, kind, 1) + struct.pack('<HH' if kind == 3 else '<I', *(
            (value, 0) if kind == 3 else (value,)))
    return b'II*\0' + struct.pack('<I', 8) + ifd + bytes(4) + bytes(w1 * h1)


def gif_frame_outside(screen: tuple[int, int], frame: tuple[int, int]) -> bytes:
    """A GIF whose one frame of ``frame`` (width, height) lies outside its logical screen of ``screen``."""
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, frame[::-1], dtype=np.uint8))
    out = io.BytesIO()
    image.save(out, 'GIF')
    data = bytearray(out.getvalue())
    data[6:10] = struct.pack('<HH', *screen)
    return bytes(data)


#: name: (bytes, the decoder that reads 300 x 300 from them, the refusal). The room's parser read 100 pixels or fewer
#: from each before, and refuses each now: ambiguous, or read as the decoders read it (300 x 300, over LIMIT).
_AMBIGUOUS = r'begins like a \w+ file, but its size cannot be read from its header \('
TWO_READINGS = {
    'TIFF size tags twice': (tiff_two_sizes((300, 300), (10, 10)), 'cv2', _AMBIGUOUS + 'tag 256 given twice'),
    'GIF frame outside its screen': (gif_frame_outside((10, 10), (300, 300)), 'pillow',
                                     _AMBIGUOUS + r'a frame of 300 x 300 at \(0, 0\), outside its screen of 10 x 10'),
    'PGM size token of 43 digits': (b'P5\n' + b'0' * 40 + b'300 300\n255\n' + bytes(90_000), 'cv2',
                                    _AMBIGUOUS + "size b'0+' is not a number of at most 10 digits"),
    'PGM comment ended by CR': (b'P5\n#\r300 300\n1 1\n255\n' + bytes(90_000), 'pillow',
                                r'declares 300 x 300 = 90000 pixels \(Netpbm\), more than the limit of 10000'),
}


def decoded_size(data: bytes, decoder: str) -> tuple[int, int]:
    if decoder == 'cv2':
        return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED).shape[1::-1]
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return image.size


@pytest.mark.parametrize('name', TWO_READINGS)
def test_a_header_two_parsers_read_differently_is_refused(name, monkeypatch):
    data, decoder, refusal = TWO_READINGS[name]
    assert decoded_size(data, decoder) == (300, 300)  # what the decoder allocates: over LIMIT
    monkeypatch.setenv('BEIT_MM_MAX_IMAGE_PIXELS', str(LIMIT))
    with pytest.raises((ImageHeaderError, ImageTooLargeError), match=r'image hostile\.img ' + refusal):
        check_image_bytes(data, 'hostile.img')


def _fresh(code: str, limit: int = LIMIT) -> subprocess.CompletedProcess:
    env = {'BEIT_MM_MAX_IMAGE_PIXELS': str(limit), 'PYTHONPATH': ROOT, 'PATH': '/usr/bin:/bin'}
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=120)


def test_pillow_and_opencv_refuse_past_the_limit_themselves():
    """A fresh process with a limit of 10,000 pixels: an image of 14,400 (between the limit and twice it, where Pillow
    only warns) is refused by Pillow's own parser (TGA, a format the room hands to Pillow) and by OpenCV's decoder
    when given the bytes directly, without the room's check."""
    code = '''
import io, warnings, numpy as np
import beit_mm
import cv2
from PIL import Image
image = Image.new('L', (120, 120))
for fmt in ('TGA', 'PNG'):
    out = io.BytesIO(); image.save(out, fmt)
    try:
        with Image.open(io.BytesIO(out.getvalue())) as opened:
            opened.load()
        print(fmt, 'pillow decoded', opened.size)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as error:
        print(fmt, 'pillow refused:', error)
try:
    print('opencv decoded', cv2.imdecode(np.frombuffer(out.getvalue(), np.uint8), 0).shape)
except cv2.error as error:
    print('opencv refused:', str(error).splitlines()[0])
'''
    run = _fresh(code)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert len(lines) == 3 and all('refused' in line for line in lines), run.stdout
    assert 'exceeds limit of 10000 pixels' in lines[0] and 'CV_IO_MAX_IMAGE_PIXELS' in lines[2], run.stdout


_MARKER = re.compile(rb'\xff[^\x00\xd0-\xd7\xff]')


def jpeg_of_scans(size: tuple[int, int], copies: int) -> bytes:
    """A progressive JPEG of one gray level with its smallest scan repeated ``copies`` more times (libjpeg decodes
    it, warning about the progression): every copy is a pass over the whole image for a few bytes of file."""
    out = io.BytesIO()
    Image.new('L', size, 128).save(out, 'JPEG', progressive=True)
    data, scans, pos = out.getvalue(), [], 0
    while (pos := data.find(b'\xff\xda', pos)) >= 0:
        end = _MARKER.search(data, pos + 2).start()
        scans.append((end - pos, pos, end))
        pos = end
    _, start, end = min(scans)
    return data[:end] + data[start:end] * copies + data[end:]


def test_a_jpeg_of_too_many_scans_is_refused_before_decoding():
    """2000 scans of 16 bytes: Pillow and OpenCV decode it (30x the time of the same image in one pass); the room
    counts its scans and refuses it, while honest JPEGs (baseline 1 scan, progressive 10, MPO 2 images) pass."""
    hostile = jpeg_of_scans((512, 512), 2000)
    assert decoded_size(hostile, 'pillow') == (512, 512) and jpeg_scans(hostile, 10**6) == 2006
    with pytest.raises(ImageWorkError, match=rf'image hostile\.jpg is a JPEG of more than {MAX_JPEG_SCANS} scans '
                       r'\(512 x 512\).*nothing was decoded\. Fix: re-encode it'):
        check_image_bytes(hostile, 'hostile.jpg')
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 80, 3), dtype=np.uint8))
    for fmt, options, scans in (('JPEG', {}, 1), ('JPEG', dict(progressive=True), 10),
                                ('MPO', dict(save_all=True, append_images=[image]), 2)):
        out = io.BytesIO()
        image.save(out, fmt, **options)
        assert jpeg_scans(out.getvalue()) == scans
        assert check_image_bytes(out.getvalue(), 'honest.jpg') == ('JPEG', 80, 64)


# ---- a checkpoint that Python's zipfile and torch's reader see differently ------------------------------------------

class _Storage:
    def __init__(self, key: str):
        self.key = key


class _Tensor:
    """Pickles as ``torch.save`` pickles a float32 tensor of ``numel`` elements on the storage record ``key``."""

    def __init__(self, key: str, numel: int):
        self.storage, self.numel = _Storage(key), numel

    def __reduce__(self):
        import collections

        import torch
        return torch._utils._rebuild_tensor_v2, (self.storage, 0, (self.numel,), (1,), False, collections.OrderedDict())


def _data_pkl(copies: int, numel: int) -> bytes:
    import pickle

    import torch

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ('storage', torch.FloatStorage, obj.key, 'cpu', numel) if isinstance(obj, _Storage) else None
    out = io.BytesIO()
    Pickler(out, protocol=2).dump({'state_dict': {f'w{i}': _Tensor(str(i), numel) for i in range(copies)}})
    return out.getvalue()


def two_directories(copies: int, numel: int) -> bytes:
    """An archive as ``torch.save`` writes one (data.pkl, byteorder, one storage record of ``numel`` float32 zeros,
    version) with two central directories of the same size: the one Python's zipfile reads (right before the end
    record) lists each record once; the one miniz reads (where the end record's offset points) lists ``copies``
    storage names for the one record's bytes, which data.pkl asks for as ``copies`` storages."""
    import zipfile
    body = io.BytesIO()
    records = [('archive/data.pkl', _data_pkl(copies, numel)), ('archive/byteorder', b'little'),
               ('archive/data/0', bytes(4 * numel)), ('archive/version', b'3\n')]
    with zipfile.ZipFile(body, 'w', zipfile.ZIP_STORED) as archive:
        archive.writestr('archive/pad', bytes(64 * copies + 2**16))  # Python's offsets, moved back, stay >= 0
        for name, data in records:
            archive.writestr(name, data)
        infos, locals_end = {i.filename: i for i in archive.infolist()}, archive.start_dir

    def entry(info: zipfile.ZipInfo, name: str, offset: int, comment: bytes = b'') -> bytes:
        return struct.pack(zipfile.structCentralDir, zipfile.stringCentralDir, 20, 3, 20, 0, 0, 0, 0, 0, info.CRC,
                           info.compress_size, info.file_size, len(name), 0, len(comment), 0, 0, 0,
                           offset) + name.encode() + comment
    names = ['archive/pad', 'archive/data.pkl', 'archive/byteorder', 'archive/version']
    torch_view = b''.join([entry(infos[n], n, infos[n].header_offset) for n in names] + [
        entry(infos['archive/data/0'], f'archive/data/{i}', infos['archive/data/0'].header_offset)
        for i in range(copies)])
    size = len(torch_view)  # zipfile adds (where it found its directory - the declared offset) = size to offsets
    python_view = b''.join(entry(infos[n], n, infos[n].header_offset - size) for n, _ in records[:-1])
    last = entry(infos['archive/version'], 'archive/version', infos['archive/version'].header_offset - size)
    python_view += entry(infos['archive/version'], 'archive/version', infos['archive/version'].header_offset - size,
                         bytes(size - len(python_view) - len(last)))
    end = struct.pack(zipfile.structEndArchive, zipfile.stringEndArchive, 0, 0, copies + 4, copies + 4, size,
                      locals_end, 0)
    return body.getvalue()[:locals_end] + torch_view + python_view + end


_PEAK = '''
import resource, sys
from beit_mm.fileio import open_checkpoint
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
open_checkpoint(sys.argv[1])
control = peak()
try:
    open_checkpoint(sys.argv[2])
    print('loaded', round(peak() - control))
except Exception as error:
    print(type(error).__name__, round(peak() - control), str(error).splitlines()[0])
'''


def test_a_checkpoint_two_zip_readers_see_differently_is_refused_before_loading(tmp_path):
    """256 names for one record of 1 MB: Python's zipfile (the record bounds) sees 4 records within the file, torch's
    reader 260, and ``torch.load`` would allocate 256 MB. Refused before loading, in a fresh process whose peak RSS
    grows by at most 16 MB past a clean control of the same size (a file of one 1 MB tensor) loaded first."""
    import torch
    hostile, clean = str(tmp_path / 'hostile.pth'), str(tmp_path / 'clean.pth')
    with open(hostile, 'wb') as f:
        f.write(two_directories(256, 2**18))
    torch.save({'state_dict': {'w': torch.zeros(2**18)}}, clean)
    run = subprocess.run([sys.executable, '-c', _PEAK, clean, hostile], capture_output=True, text=True, timeout=300,
                         env={'PYTHONPATH': ROOT, 'PATH': '/usr/bin:/bin', 'OMP_NUM_THREADS': '1'})
    assert run.returncode == 0, run.stderr
    error, grown, message = run.stdout.strip().split(' ', 2)
    assert error == 'CheckpointFileError' and int(grown) <= 16, run.stdout
    assert re.match(r".*hostile\.pth: Python's zipfile reads 4 records from it and torch's reader 260 .*two central "
                    r'directories.*nothing was loaded', message), message


# ---- work per pixel: tools/infer.py's class scores at the image's size ----------------------------------------------

_TINY_SEG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')
#: The tiny segmentor (150 classes) as real configs infer: the image resized to the model's input, whole.
_RESIZED = f'''_base_ = {_TINY_SEG!r}
model = dict(test_cfg=dict(_delete_=True, mode='whole'))
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(64, 64), keep_ratio=False),
                 dict(type='PackSegInputs')]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
'''


def _segmentor(folder) -> tuple[str, str]:
    import torch
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    config, checkpoint = str(folder / 'resized.py'), str(folder / 'tiny.pth')
    with open(config, 'w') as f:
        f.write(_RESIZED)
    torch.manual_seed(0)
    torch.save({'state_dict': build_from_config(Config.fromfile(config)).state_dict()}, checkpoint)
    return config, checkpoint


def _noise(path: str, height: int, width: int) -> str:
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path)
    return path


def test_streamed_class_scores_give_mmsegs_labels(tmp_path):
    """``upsampled_argmax`` equals ``F.interpolate(...).argmax(0)`` (NaN, inf and ties included), and
    ``infer_images`` gives the label map of mmseg's own ``inference_model`` on the demo segmentor, resized 64 -> 150 x
    200 (the slide-inference demo config is compared in tests/apis/test_infer.py)."""
    import torch
    import torch.nn.functional as F
    from mmengine.config import Config, ConfigDict
    from mmseg.apis import inference_model

    from beit_mm.apis import build_from_config
    from beit_mm.apis.label_maps import upsampled_argmax
    from beit_mm.apis.segment import infer_images
    generator = torch.Generator().manual_seed(0)
    for classes, size, align_corners in ((150, (97, 130), False), (19, (64, 33), True), (9, (40, 40), False)):
        logits = torch.randn(1, classes, 16, 12, generator=generator)
        logits[0, :, 4] = 1.0
        logits[0, classes - 1, 2:4] = logits[0, 0, 2:4]
        for bad in (None, float('nan'), float('inf')):
            if bad is not None:
                logits[0, 5, :2] = bad
            ref = F.interpolate(logits, size=size, mode='bilinear', align_corners=align_corners)[0].argmax(0)
            assert torch.equal(upsampled_argmax(logits, size, align_corners), ref), (classes, bad)
    config, checkpoint = _segmentor(tmp_path)
    image = _noise(str(tmp_path / 'a.png'), 150, 200)
    label = infer_images(config, checkpoint, [image], str(tmp_path / 'out'), device='cpu')[image]
    cfg = Config.fromfile(config)
    model = build_from_config(cfg)
    model.load_state_dict(torch.load(checkpoint)['state_dict'])
    model.cfg, model.test_cfg = cfg, ConfigDict(model.test_cfg)
    assert np.array_equal(label, inference_model(model, image).pred_sem_seg.data[0].numpy())


_INFER_PEAK = '''
import resource, sys
from beit_mm.apis.segment import infer_images
config, checkpoint, small, large, out = sys.argv[1:]
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
infer_images(config, checkpoint, [small], out + '/small', device='cpu')
control = peak()
infer_images(config, checkpoint, [large], out + '/large', device='cpu')
print(round(peak() - control))
'''


def test_infer_allocates_a_budget_per_pixel_whatever_the_classes(tmp_path):
    """A 768 x 768 image through the 150-class segmentor (scores resized from 64 x 64): mmseg's postprocessing held
    all 150 scores at full size (600 bytes per pixel; 739 measured for the whole run at 1024 x 1024). In a fresh
    process, after a 64 x 64 control, the run's peak RSS grows by at most 256 bytes per input pixel
    (``label_maps.BYTES_PER_PIXEL`` = 71 for the scores, the rest mmcv's loading and mmseg's visualizer; 168
    measured)."""
    from beit_mm.apis.label_maps import BYTES_PER_PIXEL
    assert BYTES_PER_PIXEL < 150 * 4 / 8
    config, checkpoint = _segmentor(tmp_path)
    small, large = _noise(str(tmp_path / 'small.png'), 64, 64), _noise(str(tmp_path / 'large.png'), 768, 768)
    run = subprocess.run([sys.executable, '-c', _INFER_PEAK, config, checkpoint, small, large, str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env={'PYTHONPATH': ROOT, 'PATH': '/usr/bin:/bin',
                                                                          'OMP_NUM_THREADS': '2'})
    assert run.returncode == 0, run.stderr[-2000:]
    grown_mb = int(run.stdout.split()[-1])
    assert grown_mb * 2**20 / 768**2 <= 256, f'{grown_mb} MB for {768 ** 2} pixels'


def test_a_panoptic_png_of_one_segment_per_pixel_is_refused(tmp_path):
    """192 x 192 pixels, each its own segment, all listed as things: mmdet's loader would compare the map with each of
    the 36,864 segments and keep a 36,864-pixel mask for each (1.4 GB, seconds). Refused by name before the first
    mask, past 2**30 segment-pixels."""
    from beit_mm.data.checks import DatasetCheckError
    from beit_mm.data.datasets.coco_panoptic import LoadPanopticAnnotations, id2rgb
    side = 192
    ids = np.arange(1, side * side + 1).reshape(side, side)
    png = str(tmp_path / 'every_pixel.png')
    Image.fromarray(id2rgb(ids)).save(png)
    segments = [dict(id=int(i), category=0, is_thing=True) for i in ids.ravel()]
    results = dict(seg_map_path=png, segments_info=segments, ori_shape=(side, side), img_shape=(side, side))
    with pytest.raises(DatasetCheckError, match=r'every_pixel\.png: its segments_info lists 36864 segments for 36864 '
                       r'pixels: 1358954496 segment-pixels, more than 1073741824.*Fix: give the right annotation'):
        LoadPanopticAnnotations(with_bbox=False, with_label=False)._load_masks_and_semantic_segs(results)


# ---- every decode error names its file ------------------------------------------------------------------------------

def _bad_component_jpeg() -> bytes:
    """A baseline JPEG whose scan names a component its frame lacks: its header reads, every decoder refuses it."""
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 48, 3), dtype=np.uint8))
    out = io.BytesIO()
    image.save(out, 'JPEG')
    data = bytearray(out.getvalue())
    data[data.index(b'\xff\xda') + 5] = 99  # the first component selector of the scan
    return bytes(data)


def test_every_decode_error_names_its_file(tmp_path):
    """Bytes that are no image and a JPEG no decoder reads, through the draft (worker decode) and the encoded (device
    decode) transforms and the device decode: one ``ImageDecodeError`` naming the file, escaped as ``shown`` prints it
    (Pillow's ``UnidentifiedImageError`` named a ``BytesIO``, torchvision's ``RuntimeError`` no file)."""
    import torch
    from mmcv.transforms import Compose
    from mmengine.structures import BaseDataElement

    from beit_mm.data.transforms.device_views import decode_declared
    from beit_mm.fileio.decode_errors import ImageDecodeError
    from beit_mm.fileio.names import shown
    not_image, bad = str(tmp_path / 'not\x1b[2Jan image.jpg'), str(tmp_path / 'bad_component.jpg')
    with open(not_image, 'wb') as f:
        f.write(b'these bytes are no image, nor anything else')
    with open(bad, 'wb') as f:
        f.write(_bad_component_jpeg())

    def refused(path: str, decoder: str):
        return pytest.raises(ImageDecodeError, match=rf'^image {re.escape(shown(path))}: {decoder} cannot decode it')
    for transform in ('DecodeRandomResizedCrop', 'EncodedRandomResizedCrop'):
        step = Compose([dict(type=f'beit_mm.{transform}', scale=16)])
        with refused(not_image, 'Pillow'):
            step(dict(img_path=not_image))
    with refused(bad, 'OpenCV'):
        Compose([dict(type='beit_mm.DecodeRandomResizedCrop', scale=16)])(dict(img_path=bad))
    packed = Compose([dict(type='beit_mm.EncodedRandomResizedCrop', scale=16)])(dict(img_path=bad))
    assert packed['img'].ndim == 1  # the bytes go to the device decode
    sample = BaseDataElement(metainfo=dict(img_path=bad, ori_shape=packed['ori_shape']))
    other = BaseDataElement(metainfo=dict(img_path='clean.jpg', ori_shape=(32, 48)))
    clean = torch.from_numpy(np.frombuffer(_clean_jpeg(), np.uint8).copy())
    with refused(bad, 'torchvision'):
        decode_declared([clean, torch.from_numpy(packed['img'])], [other, sample], 'cpu', 'EncodedRandomResizedCrop')


def _clean_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new('RGB', (48, 32), (10, 200, 30)).save(out, 'JPEG')
    return out.getvalue()
