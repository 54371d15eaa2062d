"""Nothing a file declares sets a size or a running time: image headers read as leniently as the decoders, annotations
bounded by their image, ONNX graphs bounded, budgets that do not grow with padding, control characters refused."""
from __future__ import annotations

import io
import json
import os
import os.path as osp
import struct
import threading
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from beit_mm.data.checks import DatasetCheckError
from beit_mm.fileio import CheckpointFileError, open_checkpoint
from beit_mm.fileio.images import ImageHeaderError, ImageTooLargeError, image_header

from ..conftest import ROOT
from .test_file_inputs import within

# ---- images: one pixel limit, read as leniently as the decoders read ---------------------------------------------


def _encoded(fmt: str, size: tuple[int, int] = (32, 32)) -> bytes:
    buffer = io.BytesIO()
    Image.new('RGB', size, (10, 200, 30)).save(buffer, fmt)
    return buffer.getvalue()


def pillow_refused_png(width: int, height: int) -> bytes:
    """A 32x32 PNG whose IHDR (its CRC fixed) declares ``width`` x ``height``, followed by a ``tEXt`` chunk with a
    wrong CRC: Pillow gives up ("broken PNG file"), libpng warns and decodes (OpenCV)."""
    data = bytearray(_encoded('PNG'))
    struct.pack_into('>II', data, 16, width, height)
    struct.pack_into('>I', data, 29, zlib.crc32(bytes(data[12:29])))
    text = struct.pack('>I', 5) + b'tEXt' + b'a\0bcd' + b'\0\0\0\0'
    return bytes(data[:33]) + text + bytes(data[33:])


def pillow_refused_jpeg(width: int, height: int) -> bytes:
    """A 32x32 JPEG whose frame header declares ``width`` x ``height`` and whose JFIF APP0 segment is cut to 5 bytes:
    Pillow's parser fails on it, libjpeg skips it (OpenCV, turbojpeg)."""
    data = bytearray(_encoded('JPEG'))
    sof = data.index(b'\xff\xc0')
    struct.pack_into('>HH', data, sof + 5, height, width)
    app0 = struct.unpack('>H', data[4:6])[0]
    return b'\xff\xd8' + b'\xff\xe0\x00\x07JFIF\x00' + bytes(data[4 + app0:])


HOSTILE_IMAGES = {'png': pillow_refused_png, 'jpg': pillow_refused_jpeg}


def decodable_png_bomb(side: int) -> bytes:
    """A grayscale PNG of ``side`` x ``side`` zeros that decodes in full (a few hundred KB for 16384), with the
    ``tEXt`` chunk Pillow refuses: OpenCV fills (and so touches) a 3-channel image of ``3 side**2`` bytes."""
    def chunk(kind: bytes, body: bytes, crc: int | None = None) -> bytes:
        crc = zlib.crc32(kind + body) if crc is None else crc
        return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', crc)
    compressor, row = zlib.compressobj(9), bytes(side + 1)  # filter byte 0, then the row's zeros
    idat = b''.join(compressor.compress(row * 256) for _ in range(side // 256)) + compressor.flush()
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', side, side, 8, 0, 0, 0, 0))
            + chunk(b'tEXt', b'a\0bcd', crc=0) + chunk(b'IDAT', idat) + chunk(b'IEND', b''))


def _openers():
    from mmcv.transforms import LoadImageFromFile
    from mmengine import fileio

    from beit_mm.fileio.inputs import check_image_file, open_image
    return {'LoadImageFromFile cv2': lambda p: LoadImageFromFile()(dict(img_path=p)),
            'LoadImageFromFile pillow': lambda p: LoadImageFromFile(imdecode_backend='pillow')(dict(img_path=p)),
            'mmengine.fileio.get': fileio.get, 'check_image_file': check_image_file, 'open_image': open_image}


@pytest.mark.parametrize('kind', sorted(HOSTILE_IMAGES))
def test_headers_pillow_refuses_are_bounded_before_any_decoder(tmp_path, kind):
    import cv2
    small = HOSTILE_IMAGES[kind](32, 32)
    with pytest.raises(Exception):  # the premise: Pillow's parser refuses these bytes ...
        Image.open(io.BytesIO(small))
    assert cv2.imdecode(np.frombuffer(small, np.uint8), cv2.IMREAD_COLOR).shape == (32, 32, 3)  # ... OpenCV does not
    path = str(tmp_path / f'bomb.{kind}')
    with open(path, 'wb') as f:
        f.write(HOSTILE_IMAGES[kind](16384, 16384))
    for name, opener in _openers().items():
        with pytest.raises(ImageTooLargeError, match=r'bomb\.\w+ declares 16384 x 16384 = 268435456 pixels \((PNG|JPEG)'
                           r'\), more than the limit of 89478485 pixels'):
            opener(path)
    small_path = str(tmp_path / f'small.{kind}')
    with open(small_path, 'wb') as f:
        f.write(small)
    assert _openers()['LoadImageFromFile cv2'](small_path)['img'].shape == (32, 32, 3)


OPENCV_FORMATS = ('.png', '.jpg', '.bmp', '.tiff', '.webp', '.ppm', '.pgm', '.pbm', '.pam', '.pfm', '.sr', '.hdr',
                  '.jp2')


def test_the_header_parsers_read_what_opencv_decodes():
    """Every format OpenCV writes (and so reads): the size from the header equals the decoded one."""
    import cv2
    rgb = np.random.default_rng(0).integers(0, 255, (37, 53, 3), np.uint8)
    for ext in OPENCV_FORMATS:
        array = rgb.astype(np.float32) / 255 if ext in ('.pfm', '.hdr') else rgb[..., 0] if ext in ('.pgm', '.pbm') \
            else rgb
        ok, encoded = cv2.imencode(ext, array)
        assert ok, ext
        decoded = cv2.imdecode(encoded, cv2.IMREAD_UNCHANGED)
        assert image_header(encoded.tobytes())[1:3] == (decoded.shape[1], decoded.shape[0]) == (53, 37), ext


def test_a_multipage_tiff_counts_every_page(tmp_path, monkeypatch):
    """tifffile reads every page of a series: the limit holds for their sum."""
    from mmengine import fileio
    page = Image.new('RGB', (32, 32))
    path = str(tmp_path / 'pages.tif')
    page.save(path, save_all=True, append_images=[page] * 3)
    monkeypatch.setenv('BEIT_MM_MAX_IMAGE_PIXELS', str(3 * 32 * 32))
    with pytest.raises(ImageTooLargeError, match=r'32 x 32 = 1024 pixels \(TIFF, 4096 pixels in all its pages\)'):
        fileio.get(path)


def test_an_image_signature_without_a_readable_size_is_refused(tmp_path):
    from mmengine import fileio
    png = _encoded('PNG')
    cases = {'first.png': png[:8] + png[33:],  # IHDR moved away from the front: the size cannot be read
             'cut.jpg': _encoded('JPEG')[:20],  # no frame header before the end
             'image.exr': b'\x76\x2f\x31\x01' + bytes(60)}  # OpenEXR: a format whose header beit_mm does not read
    for name, data in cases.items():
        path = str(tmp_path / name)
        with open(path, 'wb') as f:
            f.write(data)
        with pytest.raises(ImageHeaderError, match=rf'{name} begins like a .* file, but its size cannot be read'):
            fileio.get(path)
    text = str(tmp_path / 'notes.json')
    with open(text, 'w') as f:
        f.write('{"P6": 1}')
    assert fileio.get(text) == b'{"P6": 1}'  # bytes no decoder reads pass


# ---- annotations: bounded by the image they annotate --------------------------------------------------------------


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    from beit_mm.data.demo.coco import make_demo_coco
    return make_demo_coco(str(tmp_path_factory.mktemp('coco') / 'demo'), 1, 2, 32, seed=0)


def _coco_dataset(root: str, ann_file: str, loader: dict):
    from mmdet.registry import DATASETS
    from mmengine.registry import init_default_scope

    from beit_mm.data.demo.coco import COCO_DEMO_METAINFO
    init_default_scope('mmdet')
    return DATASETS.build(dict(type='CocoDataset', data_root=root, metainfo=COCO_DEMO_METAINFO, test_mode=True,
                               ann_file=ann_file, data_prefix=dict(img='val2017/'),
                               pipeline=[dict(type='LoadImageFromFile'), loader]))


def _edited_instances(root: str, tmp_path, edit) -> str:
    with open(osp.join(root, 'annotations', 'instances_val2017.json')) as f:
        ann = json.load(f)
    edit(next(a for a in ann['annotations'] if a['image_id'] == ann['images'][0]['id']))  # dataset[0]'s instance 0
    path = str(tmp_path / 'instances.json')
    with open(path, 'w') as f:
        json.dump(ann, f)
    return path


LOADER = dict(type='beit_mm.LoadCocoAnnotations', with_bbox=True, with_mask=True)


def test_instance_masks_are_bounded_by_their_image(coco_root, tmp_path):
    clean = _coco_dataset(coco_root, 'annotations/instances_val2017.json', LOADER)
    mmdet_own = _coco_dataset(coco_root, 'annotations/instances_val2017.json',
                              dict(type='LoadAnnotations', with_bbox=True, with_mask=True))
    np.testing.assert_array_equal(clean[0]['gt_masks'].masks, mmdet_own[0]['gt_masks'].masks)
    height, width = clean[0]['ori_shape']

    def huge_rle(a):
        a['segmentation'] = {'size': [16000, 16000], 'counts': [0, 16000 * 16000]}

    def far_polygon(a):
        a['segmentation'] = [[1.0, 1.0, 10.0, 1.0, 2.0**40, 10.0]]

    def short_runs(a):  # the image's size, but runs beyond it: pycocotools' decode writes past its buffer
        a['segmentation'] = {'size': [height, width], 'counts': [0, height * width + 10**6]}

    for edit, problem in ((huge_rle, r'an RLE of size \[16000, 16000\], not the image\'s \[\d+, \d+\]'),
                          (far_polygon, r'a polygon reaching x 1..1.09951e\+12, y 1..10, more than 32 pixels outside'),
                          (short_runs, r'an RLE whose runs cover \d+ pixels, not the image\'s \d+')):
        dataset = _coco_dataset(coco_root, _edited_instances(coco_root, tmp_path, edit), LOADER)
        with pytest.raises(DatasetCheckError, match=rf'val2017/\S+ \(instance 0\) has {problem}.*Fix: correct'):
            dataset[0]


def test_every_instance_config_loads_masks_through_the_check():
    configs = [osp.join(ROOT, 'configs', *p) for p in (
        ('_base_', 'datasets', 'coco-instance_demo-64x64.py'),
        ('eomt', 'eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-640x640.py'),
        ('eomt', 'eomt_dinov2-large-reg4-p16_4xb4-amp-12e_coco-instance-1280x1280.py'))]
    for config in configs:
        text = open(config).read()
        assert "'beit_mm.LoadCocoAnnotations', with_bbox=True, with_mask=True" in text, config
    for folder, _, names in os.walk(osp.join(ROOT, 'configs')):
        for name in names:
            assert "mmdet.LoadAnnotations', with_bbox=True, with_mask=True" not in open(osp.join(folder, name)).read()


def _panoptic_dataset(root: str, ann_file: str):
    from mmdet.registry import DATASETS
    from mmengine.registry import init_default_scope

    from beit_mm.data.demo.coco import COCO_DEMO_METAINFO
    init_default_scope('mmdet')
    return DATASETS.build(dict(type='CocoPanopticDataset', data_root=root, metainfo=COCO_DEMO_METAINFO,
                               test_mode=True, ann_file=ann_file,
                               data_prefix=dict(img='val2017/', seg='annotations/panoptic_val2017/'),
                               pipeline=[dict(type='LoadImageFromFile'),
                                         dict(type='beit_mm.LoadPanopticAnnotations')]))


def test_segments_per_image_are_bounded_by_its_png(coco_root, tmp_path):
    with open(osp.join(coco_root, 'annotations', 'panoptic_val2017.json')) as f:
        ann = json.load(f)
    image = next(a for a in ann['annotations'] if a['image_id'] == ann['images'][0]['id'])  # dataset[0]'s
    first = image['segments_info']
    assert len(_panoptic_dataset(coco_root, 'annotations/panoptic_val2017.json')[0]['gt_masks']) > 0
    image['segments_info'] = first + [dict(first[0], id=10**6 + i) for i in range(2000)]
    path = str(tmp_path / 'panoptic.json')
    with open(path, 'w') as f:
        json.dump(ann, f)
    with pytest.raises(DatasetCheckError, match=rf'\.png: its segments_info lists {len(first) + 2000} segments .*but '
                       r'the PNG holds \d+ segment ids'):
        _panoptic_dataset(coco_root, path)[0]


def test_a_deep_annotation_json_is_named(coco_root, tmp_path):
    import mmengine
    path = str(tmp_path / 'deep.json')
    with open(path, 'w') as f:
        f.write('{"images": ' + '[' * 100000 + ']' * 100000 + '}')
    from beit_mm.fileio.json_file import JSONFileError
    with pytest.raises(JSONFileError, match=r'deep\.json nests 100001 levels deep, more than 64'):
        _coco_dataset(coco_root, path, LOADER)
    with pytest.raises(JSONFileError, match='nests 100001 levels deep'):
        mmengine.load(path)


# ---- ONNX: a graph is a program ---------------------------------------------------------------------------------


def _onnx_file(path: str, graph, shape=(1, 3, 64, 64)) -> str:
    import onnx
    from onnx import helper

    from beit_mm.apis.export import KIND_KEY, SHAPE_KEY
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 17)])
    for key, value in ((KIND_KEY, 'segmentor'), (SHAPE_KEY, json.dumps(list(shape)))):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, path)
    return path


def _loop_graph():
    """``input`` -> a Loop of 2**62 iterations of an Add -> ``output``: a 1 KB file that never ends."""
    from onnx import TensorProto, helper
    body = helper.make_graph(
        [helper.make_node('Identity', ['cond_in'], ['cond_out']), helper.make_node('Add', ['x_in', 'x_in'], ['x_out'])],
        'body', [helper.make_tensor_value_info('i', TensorProto.INT64, []),
                 helper.make_tensor_value_info('cond_in', TensorProto.BOOL, []),
                 helper.make_tensor_value_info('x_in', TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info('cond_out', TensorProto.BOOL, []),
         helper.make_tensor_value_info('x_out', TensorProto.FLOAT, None)])
    nodes = [helper.make_node('Constant', [], ['n'], value=helper.make_tensor('n', TensorProto.INT64, [], [2**62])),
             helper.make_node('Constant', [], ['c'], value=helper.make_tensor('c', TensorProto.BOOL, [], [True])),
             helper.make_node('Loop', ['n', 'c', 'input'], ['output'], body=body)]
    return helper.make_graph(nodes, 'loop', [helper.make_tensor_value_info('input', TensorProto.FLOAT, [1, 3, 64, 64])],
                             [helper.make_tensor_value_info('output', TensorProto.FLOAT, [1, 3, 64, 64])])


def _image_folder(tmp_path) -> str:
    folder = tmp_path / 'images'
    folder.mkdir()
    Image.new('RGB', (64, 64), (10, 200, 30)).save(folder / 'a.png')
    return str(folder)


def test_an_onnx_loop_is_refused_before_it_runs(tmp_path):
    from beit_mm.apis.onnx_inference import OnnxModelError, infer_onnx

    from ..tools.test_tools import CONFIG
    onnx_file = _onnx_file(str(tmp_path / 'loop.onnx'), _loop_graph())
    assert os.path.getsize(onnx_file) < 2048
    with pytest.raises(OnnxModelError, match=r"loop\.onnx: node '.*' is Loop, control flow \(its attribute 'body' "
                       r'holds a graph\).*nothing was run'):
        within(120, None, lambda: infer_onnx(CONFIG, onnx_file, [_image_folder(tmp_path)], str(tmp_path / 'out')))


def test_an_onnx_window_larger_than_its_input_needs_is_refused(tmp_path):
    from onnx import TensorProto, helper

    from beit_mm.apis.onnx_inference import OnnxModelError, infer_onnx

    from ..tools.test_tools import CONFIG
    images = _image_folder(tmp_path)
    for side, problem in ((12000, r'declares a 12000x12000 window, 144000000 pixels, more than the pixel limit'),
                          (9000, r'declares a 9000x9000 window for a 64x64 input: padding it costs 19775x')):
        graph = helper.make_graph([helper.make_node('Identity', ['input'], ['output'])], 'window',
                                  [helper.make_tensor_value_info('input', TensorProto.FLOAT, [1, 3, side, side])],
                                  [helper.make_tensor_value_info('output', TensorProto.FLOAT, [1, 3, side, side])])
        onnx_file = _onnx_file(str(tmp_path / f'window{side}.onnx'), graph, (1, 3, side, side))
        with pytest.raises(OnnxModelError, match=problem):
            infer_onnx(CONFIG, onnx_file, [images], str(tmp_path / f'out{side}'))


def test_an_onnx_run_stops_on_timeout_and_on_ctrl_c():
    """The loop run directly (the graph check bypassed): the time budget and Ctrl-C stop onnxruntime itself (a run
    that did not stop would keep the test waiting until the 120 s guards fail it)."""
    import _thread
    import signal

    import onnxruntime as ort
    from onnx import helper

    from beit_mm.apis.onnx_inference import OnnxModelError, run_bounded
    model = helper.make_model(_loop_graph(), opset_imports=[helper.make_opsetid('', 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=['CPUExecutionProvider'])
    feeds = {'input': np.zeros((1, 3, 64, 64), np.float32)}
    with pytest.raises(OnnxModelError, match=r'loop\.onnx: one run took more than 0\.5 s and was stopped'):
        within(120, None, lambda: run_bounded(session, feeds, 'loop.onnx', timeout_s=0.5))
    if threading.current_thread() is not threading.main_thread():
        pytest.skip('Ctrl-C reaches the main thread only')
    fired = []
    watchdog = threading.Timer(120, lambda: (fired.append(True), _thread.interrupt_main()))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        threading.Timer(0.5, _thread.interrupt_main).start()
        watchdog.start()
        with pytest.raises(KeyboardInterrupt):
            run_bounded(session, feeds, 'loop.onnx', timeout_s=3600)
    finally:
        watchdog.cancel()
        signal.signal(signal.SIGINT, previous)
    assert not fired, 'Ctrl-C did not stop the run'
    assert not [t for t in threading.enumerate() if t.name == 'onnxruntime-run' and t.is_alive()]


def test_the_operator_allow_list_holds_the_demo_export(tmp_path):
    """The tiny BEiT + UPerNet segmentor as ``tools/export.py`` writes it passes the check; a custom domain does not."""
    import onnx

    from beit_mm.apis import build_from_config
    from beit_mm.apis.export import export_onnx
    from beit_mm.apis.onnx_inference import EXPORTED_OPERATORS, OnnxModelError, check_graph

    from ..tools.test_tools import CONFIG
    from mmengine.config import Config
    out = str(tmp_path / 'tiny.onnx')
    export_onnx(build_from_config(Config.fromfile(CONFIG)), 'segmentor', (64, 64), out)
    data = open(out, 'rb').read()
    check_graph(data, out)
    proto = onnx.load_from_string(data)
    assert {node.op_type for node in proto.graph.node} <= EXPORTED_OPERATORS
    proto.graph.node[0].domain = 'com.example'
    with pytest.raises(OnnxModelError, match=r"is \w+, an operator of the domain 'com.example'"):
        check_graph(proto.SerializeToString(), out)


# ---- budgets that do not grow with padding ------------------------------------------------------------------------


def test_shared_lists_padded_to_megabytes_are_refused(tmp_path):
    """7 KB of shared lists (40M entries to a walker) beside 3 MB of weights: a budget proportional to the file's
    size (49M at 16 per byte) let them through; one per storage does not."""
    leaf = ['x' * 100] * 1000
    path = str(tmp_path / 'padded.pth')
    torch.save({'state_dict': {'w': torch.zeros(750_000)}, 'meta': {'notes': [[leaf] * 100] * 4}}, path)
    assert os.path.getsize(path) > 3_000_000
    with pytest.raises(CheckpointFileError, match=r'expands to more than \d+ entries and characters of text, far more '
                       r'than a checkpoint of \d+ storages holds'):
        open_checkpoint(path)


class _HoleWriter(io.RawIOBase):
    """A file writer that seeks over all-zero blocks instead of writing them: a sparse file, as a tar restores one."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, data):
        data = bytes(data)
        if len(data) >= 4096 and data.count(0) == len(data):
            self.f.seek(len(data), os.SEEK_CUR)
        else:
            self.f.write(data)
        return len(data)

    def tell(self):
        return self.f.tell()

    def seek(self, offset, whence=os.SEEK_SET):
        return self.f.seek(offset, whence)


def test_a_sparse_checkpoint_is_refused_before_it_is_read(tmp_path):
    from beit_mm.fileio.inputs import SparseFileError
    path = str(tmp_path / 'sparse.pth')
    with open(path, 'wb') as f:
        torch.save({'state_dict': {'w': torch.zeros(2**26)}}, _HoleWriter(f))  # 256 MB of holes
        f.truncate()
    stat = os.stat(path)
    assert stat.st_size > 2**28 and stat.st_blocks * 512 < 2**20
    with pytest.raises(SparseFileError, match=r'sparse\.pth is \d+ bytes long but occupies \d+ bytes on disk: a '
                       r'sparse file.*nothing was read'):
        open_checkpoint(path)


# ---- text from files -------------------------------------------------------------------------------------------------


def test_class_names_with_control_characters_are_refused(tmp_path):
    from beit_mm.data.datasets.custom import read_classes
    path = str(tmp_path / 'classes.txt')
    with open(path, 'w') as f:
        f.write('road\n\x1b]0;owned\x07\x1b[2Jsky\ncar\n')
    with pytest.raises(DatasetCheckError, match=r"classes\.txt: line 2 '.*' holds control character\(s\) \\x1b, \\x07, "
                       r'which would act on the terminal'):
        read_classes(path)
    checkpoint = str(tmp_path / 'meta.pth')
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'dataset_meta': {'classes': ('road', '\x1b[2Jsky')}}},
               checkpoint)
    with pytest.raises(CheckpointFileError, match=r'meta\.dataset_meta\.classes\[1\] .* holds control character'):
        open_checkpoint(checkpoint)


# ---- what the hostile files cost: peak memory in a fresh process, against clean controls ---------------------------

def _probe(folder: str, results) -> None:
    """In a forked child (its peak RSS starts at the parent's present RSS): the clean controls, then each hostile
    file; ``results`` gets ``(name, error class, MB of peak RSS grown past the controls' peak)``."""
    import resource

    from mmcv.transforms import LoadImageFromFile

    from beit_mm.data.datasets.coco_panoptic import LoadCocoAnnotations

    def peak_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def rle(size):
        instance = dict(mask=dict(size=size, counts=[0, size[0] * size[1]]), ignore_flag=0)
        return dict(img_path='a.png', ori_shape=(64, 96), instances=[instance])

    load, masks = LoadImageFromFile(), LoadCocoAnnotations(with_bbox=False, with_label=False, with_mask=True)
    load(dict(img_path=osp.join(folder, 'clean.png')))
    open_checkpoint(osp.join(folder, 'clean.pth'))
    masks(rle([64, 96]))
    control = peak_mb()
    for name, call in (('png', lambda: load(dict(img_path=osp.join(folder, 'bomb.png')))),
                       ('sparse', lambda: open_checkpoint(osp.join(folder, 'sparse.pth'))),
                       ('rle', lambda: masks(rle([16000, 16000])))):
        try:
            call()
            results.put((name, 'loaded', round(peak_mb() - control)))
        except Exception as error:  # noqa: BLE001  (reported to the test)
            results.put((name, type(error).__name__, round(peak_mb() - control)))


def test_hostile_files_cost_no_more_than_clean_ones(tmp_path):
    """The refusals come before any allocation: peak RSS after each hostile file stays within 64 MB of the peak after
    the clean controls (the PNG of 16384 x 16384 zeros decodes to 768 MB in OpenCV, the sparse file holds 256 MB of
    zeros, the RLE 244 MB of mask)."""
    import multiprocessing
    folder = str(tmp_path)
    Image.new('RGB', (64, 64)).save(osp.join(folder, 'clean.png'))
    torch.save({'state_dict': {'w': torch.ones(1000)}}, osp.join(folder, 'clean.pth'))
    with open(osp.join(folder, 'bomb.png'), 'wb') as f:
        f.write(decodable_png_bomb(16384))
    with open(osp.join(folder, 'sparse.pth'), 'wb') as f:
        torch.save({'state_dict': {'w': torch.zeros(2**26)}}, _HoleWriter(f))
        f.truncate()
    context = multiprocessing.get_context('fork')
    results = context.Queue()
    child = context.Process(target=_probe, args=(folder, results))
    child.start()
    child.join(300)
    assert child.exitcode == 0, child.exitcode
    outcomes = {name: (error, grown) for name, error, grown in (results.get(timeout=10) for _ in range(3))}
    assert outcomes.keys() == {'png', 'sparse', 'rle'}
    for name, (error, grown) in outcomes.items():
        assert error in ('ImageTooLargeError', 'SparseFileError', 'DatasetCheckError') and grown <= 64, \
            (name, error, grown)
