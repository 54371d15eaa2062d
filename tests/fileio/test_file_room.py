"""The file room: every checkpoint source opens through one door that never runs what a file carries (a harmless pickle
that would write a marker, placed in the torch hub cache), and what files declare is bounded before use."""
from __future__ import annotations

import json
import os
import os.path as osp
import struct
import zipfile

import pytest
import torch

from beit_mm.fileio import CheckpointFileError
from beit_mm.fileio.remote import hub_cache_path

from ..tools.test_tools import CONFIG

URL = 'https://example.invalid/models/evil.pth'


class Payload:
    """Unpickled with ``weights_only=False``, this writes ``marker``: what a stranger's pickle can do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return exec, (f'open({self.marker!r}, "w").write("ran")', )


@pytest.fixture
def marker(tmp_path) -> str:
    path = str(tmp_path / 'MARKER')
    yield path
    assert not osp.exists(path), 'a file\'s pickled code was executed'


@pytest.fixture
def hub(tmp_path, monkeypatch) -> str:
    """An empty torch hub dir for this test (``$TORCH_HOME/hub``, also for subprocesses)."""
    home = tmp_path / 'torch_home'
    monkeypatch.setenv('TORCH_HOME', str(home))
    monkeypatch.setattr(torch.hub, '_hub_dir', str(home / 'hub'))
    return str(home / 'hub')


def plant(url: str, marker: str) -> str:
    """A code-carrying checkpoint where a download of ``url`` lies in the hub cache."""
    path = hub_cache_path(url)
    os.makedirs(osp.dirname(path), exist_ok=True)
    torch.save({'state_dict': {'w': torch.zeros(1)}, 'payload': Payload(marker)}, path)
    return path


def _mmengine_names() -> list[tuple[str, str]]:
    """(MMEngine checkpoint name, the URL it resolves to) for each URL-resolving prefix."""
    from mmengine.runner.checkpoint import get_external_models, get_mmcls_models, get_torchvision_models
    openmmlab = next((k, v) for k, v in get_external_models().items() if v.startswith('https://'))
    mmcls = next(iter(get_mmcls_models().items()))
    return [(URL, URL), ('torchvision://resnet18', get_torchvision_models()['resnet18']),
            (f'open-mmlab://{openmmlab[0]}', openmmlab[1]), (f'mmcls://{mmcls[0]}', mmcls[1])]


@pytest.mark.parametrize('index', range(4), ids=['https', 'torchvision', 'open-mmlab', 'mmcls'])
def test_mmengine_prefixes_never_unpickle(index, hub, marker):
    from mmengine.runner.checkpoint import CheckpointLoader
    name, url = _mmengine_names()[index]
    plant(url, marker)
    with pytest.raises(CheckpointFileError, match='pickled Python objects that safe loading'):
        CheckpointLoader.load_checkpoint(name, map_location='cpu')


def test_unknown_prefix_is_refused():
    from mmengine.runner.checkpoint import CheckpointLoader
    with pytest.raises(CheckpointFileError, match='download the file and pass its local path'):
        CheckpointLoader.load_checkpoint('pavi://somewhere/model.pth')


def test_a_url_is_opened_like_a_local_file(hub):
    """A good file in the cache loads (the download step is skipped), stored config source dropped."""
    from beit_mm.fileio.remote import open_url
    path = hub_cache_path(URL)
    os.makedirs(osp.dirname(path))
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'cfg': 'import os'}}, path)
    opened = open_url(URL)
    assert torch.equal(opened['state_dict']['w'], torch.ones(2)) and 'cfg' not in opened['meta']


def test_pretrained_init_cfg_url_of_mmseg_and_mmpretrain(hub, marker):
    """The model-zoo habit of every OpenMMLab config: ``init_cfg=dict(type='Pretrained', checkpoint=URL)``."""
    from mmengine.registry import MODELS
    plant(URL, marker)
    for cfg in (dict(type='mmseg.ResNetV1c', depth=18), dict(type='mmpretrain.ResNet', depth=18)):
        model = MODELS.build(dict(cfg, init_cfg=dict(type='Pretrained', checkpoint=URL)))
        with pytest.raises(CheckpointFileError, match='pickled Python objects'):
            model.init_weights()


def test_dalle_encoder_init_weights_url(hub, marker):
    from beit_mm.registry import MODELS
    plant(URL, marker)
    encoder = MODELS.build(dict(type='DALLEEncoder', init_cfg=dict(type='Pretrained', checkpoint=URL)))
    with pytest.raises(CheckpointFileError, match='pickled Python objects'):
        encoder.init_weights()


def test_load_from_url(hub, marker, tmp_path):
    from mmengine.config import Config
    from mmengine.runner import Runner
    plant(URL, marker)
    cfg = Config.fromfile(CONFIG)
    cfg.update(work_dir=str(tmp_path / 'work'), load_from=URL)
    runner = Runner.from_cfg(cfg)
    with pytest.raises(CheckpointFileError, match='pickled Python objects'):
        runner.load_or_resume()


def test_tools_test_with_a_url(hub, marker, tmp_path):
    """``tools/test.py CFG URL`` (:func:`beit_mm.apis.testing.run_test`) opens the cached file safely: refused by
    name."""
    from beit_mm.apis.testing import RunTestRefused, run_test
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    plant(URL, marker)
    data = make_demo_ade20k(str(tmp_path / 'ade'), num_train=1, num_val=1, size=32)
    with pytest.raises(RunTestRefused, match='pickled Python objects that safe loading'):
        run_test(CONFIG, URL, work_dir=str(tmp_path / 'w'),
                 cfg_options={'test_dataloader.dataset.data_root': data})


def test_work_dir_pointer_is_never_followed_to_a_url_or_out_of_the_work_dir(hub, marker, tmp_path):
    """A URL or an outside path in a work dir's ``last_checkpoint`` is refused by name; ``--resume`` ignores it (a
    warning) and takes the newest complete checkpoint of the work dir."""
    from beit_mm.apis import resolve_checkpoint, run_infer
    from beit_mm.fileio.work_dir import find_last_complete_checkpoint
    plant(URL, marker)
    work = tmp_path / 'shared_work_dir'
    work.mkdir()
    outside = tmp_path / 'elsewhere.pth'
    torch.save({'state_dict': {}}, str(outside))
    for pointed in (URL, str(outside), '../elsewhere.pth'):
        (work / 'last_checkpoint').write_text(pointed)
        with pytest.raises(FileNotFoundError, match='never followed'):
            resolve_checkpoint(str(work))
        assert find_last_complete_checkpoint(str(work)) is None
    (work / 'last_checkpoint').write_text(URL)
    images = tmp_path / 'images'
    images.mkdir()
    from PIL import Image
    Image.new('RGB', (32, 32)).save(str(images / 'a.jpg'))
    with pytest.raises(FileNotFoundError, match='never followed to a URL'):  # tools/infer.py CFG WORK_DIR IMAGES
        run_infer(CONFIG, str(work), [str(images)], out_dir=str(tmp_path / 'out'))


def _torchscript_with_setstate(path: str, victim: str) -> None:
    """A TorchScript module whose ``__setstate__`` (run by ``torch.jit.load``) overwrites bytes of ``victim`` through a
    shared memory map: code that a TorchScript file carries."""

    class Writer(torch.nn.Module):

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer('weight', torch.zeros(2))
            self.victim = victim
            self.count = 0

        @torch.jit.export
        def __getstate__(self) -> tuple[torch.Tensor, str, bool]:
            return self.weight, self.victim, self.training

        @torch.jit.export
        def __setstate__(self, state: tuple[torch.Tensor, str, bool]) -> None:
            self.weight = state[0]
            self.victim = state[1]
            self.training = state[2]
            mapped = torch.from_file(state[1], shared=True, size=4, dtype=torch.uint8)
            self.count = int(mapped.fill_(88).sum())  # used, so that TorchScript keeps the write

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.weight

    torch.jit.save(torch.jit.script(Writer()), path)


def test_torchscript_clip_file_is_refused_unless_trusted_by_name(tmp_path):
    from beit_mm.registry import MODELS
    victim = tmp_path / 'victim.bin'
    victim.write_bytes(b'safe')
    path = str(tmp_path / 'ViT-B-16.pt')
    _torchscript_with_setstate(path, str(victim))
    victim.write_bytes(b'safe')
    teacher = MODELS.build(dict(type='CLIPTeacher', image_size=32, patch_size=16, width=64, layers=1, heads=2,
                                output_dim=32, checkpoint=path))
    with pytest.raises(CheckpointFileError, match=r'TorchScript.*--model clip --source openai --trust-code'):
        teacher.init_weights()
    assert victim.read_bytes() == b'safe'
    from beit_mm.fileio.checkpoint import open_torchscript_trusted
    open_torchscript_trusted(path)  # trusted by name: the code runs, as the user asked
    assert victim.read_bytes() == b'XXXX'


def test_compressed_or_overlong_zip_records_are_refused(tmp_path):
    from beit_mm.fileio import open_checkpoint
    good = str(tmp_path / 'good.pth')
    torch.save({'w': torch.zeros(1000)}, good)
    packed = str(tmp_path / 'deflated.pth')
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(packed, 'w', zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(CheckpointFileError, match='is compressed'):
        open_checkpoint(packed)
    assert torch.equal(open_checkpoint(good)['w'], torch.zeros(1000))


def test_json_nesting_and_size_are_bounded(tmp_path):
    from beit_mm.fileio.json_file import JSONFileError, read_json
    deep = tmp_path / 'config.json'
    deep.write_text('[' * 100000 + ']' * 100000)
    with pytest.raises(JSONFileError, match='nests 100000 levels deep'):
        read_json(str(deep))
    big = tmp_path / 'big.json'
    big.write_text('"' + 'x' * 100 + '"')
    with pytest.raises(JSONFileError, match='more than the 50'):
        read_json(str(big), max_bytes=50)
    assert read_json(str(big)) == 'x' * 100


def test_safetensors_header_is_bounded(tmp_path):
    from beit_mm.fileio.checkpoint import load_safetensors
    from safetensors.torch import save_file
    good = str(tmp_path / 'good.safetensors')
    save_file({'w': torch.ones(3)}, good)
    assert torch.equal(load_safetensors(good)['w'], torch.ones(3))
    data = open(good, 'rb').read()
    huge = tmp_path / 'huge.safetensors'
    huge.write_bytes(struct.pack('<Q', 2**62) + data[8:])
    with pytest.raises(CheckpointFileError, match='header length'):
        load_safetensors(str(huge))
    length = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + length])
    header['w']['data_offsets'] = [0, 10**12]
    text = json.dumps(header).encode()
    crafted = tmp_path / 'crafted.safetensors'
    crafted.write_bytes(struct.pack('<Q', len(text)) + text + data[8 + length:])
    with pytest.raises(CheckpointFileError, match='outside the file'):
        load_safetensors(str(crafted))


@pytest.mark.parametrize('content', [b'', b'{"generator": ', b'[]'])
def test_a_demo_marker_proves_ownership_by_its_content(tmp_path, content):
    """Anyone can create a file named like the marker: an empty or unparsable one gives no right to rewrite."""
    from beit_mm.data.demo.ade20k import make_demo_ade20k
    from beit_mm.data.demo.root import MARKER, NotADemoRootError
    root = tmp_path / 'data'
    (root / 'images').mkdir(parents=True)
    (root / 'images' / 'mine.jpg').write_bytes(b'user data')
    (root / MARKER).write_bytes(content)
    with pytest.raises(NotADemoRootError, match='proves nothing'):
        make_demo_ade20k(str(root), 2, 1, 32)
    assert (root / 'images' / 'mine.jpg').read_bytes() == b'user data'
