"""tools/infer.py (mmseg's MMSegInferencer on a beit_mm config): overlays and label maps for a folder and a file,
and the label maps equal the segmentor's own prediction through mmseg.apis.inference_model."""
import os
import os.path as osp

import numpy as np
import torch
from mmengine.config import Config, ConfigDict
from PIL import Image

from beit_mm.apis import build_from_config, drop_pretrained_init
from beit_mm.apis.segment import infer_images
from beit_mm.data.demo.ade20k import make_demo_ade20k

from ..conftest import ROOT

CONFIG = osp.join(ROOT, 'tests', 'configs', 'tiny_beit_upernet_ade_demo.py')


def test_infer_folder_and_file(tmp_path):
    from mmseg.apis import inference_model
    from mmseg.datasets import ADE20KDataset
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=1, num_val=3, size=80, seed=1)
    val = osp.join(root, 'images', 'validation')
    images = sorted(os.listdir(val))
    cfg = Config.fromfile(CONFIG)
    torch.manual_seed(0)
    model = build_from_config(cfg)
    meta = dict(classes=ADE20KDataset.METAINFO['classes'], palette=ADE20KDataset.METAINFO['palette'])
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    torch.save({'state_dict': model.state_dict(), 'meta': dict(dataset_meta=meta)}, work_dir / 'iter_4.pth')
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'iter_4.pth'))

    out = tmp_path / 'out'
    preds = infer_images(CONFIG, str(work_dir), [val, osp.join(val, images[0])], str(out))
    assert len(preds) == len(images)  # keyed by path: the file given on its own as well is predicted once
    assert sorted(os.listdir(out / 'vis')) == images
    assert sorted(os.listdir(out / 'pred')) == sorted(osp.splitext(n)[0] + '.png' for n in images)
    model.cfg = cfg
    model.dataset_meta = meta
    model.test_cfg = ConfigDict(model.test_cfg)  # mmseg's inference_model reads test_cfg.mode
    for name in images:
        path = osp.join(val, name)
        with Image.open(path) as im:
            size = im.size
        with Image.open(out / 'vis' / name) as vis:
            assert vis.size == size
        label = np.asarray(Image.open(out / 'pred' / (osp.splitext(name)[0] + '.png')))
        assert label.shape == (size[1], size[0])
        ref = inference_model(model, path).pred_sem_seg.data[0].numpy()
        assert np.array_equal(label, ref)
        assert np.array_equal(preds[path], ref)


def test_build_from_config_reads_no_pretrained_path(tmp_path):
    """mmseg's own BEiT configs name their weights as ``model.pretrained`` (``EncoderDecoder`` hands the path to the
    backbone, whose ``init_weights`` loads it): ``build_from_config`` drops that path as it drops ``Pretrained``
    init_cfgs, and keeps a boolean ``pretrained`` flag."""
    missing = str(tmp_path / 'beit_base_patch16_224_pt22k_ft22k.pth')
    cfg = Config(dict(default_scope='mmseg', model=dict(
        type='EncoderDecoder', pretrained=missing,
        backbone=dict(type='BEiT', img_size=(32, 32), embed_dims=32, num_layers=2, num_heads=2, out_indices=(1, )),
        decode_head=dict(type='FCNHead', in_channels=32, channels=16, num_convs=1, num_classes=3, in_index=0))))
    model = build_from_config(cfg)  # was: FileNotFoundError for the missing file, from BEiT.init_weights
    assert model.backbone.init_cfg is None
    node = dict(backbone=dict(pretrained=False, init_cfg=dict(type='Pretrained', checkpoint=missing)), pretrained=missing)
    drop_pretrained_init(node)
    assert node == dict(backbone=dict(pretrained=False, init_cfg=None), pretrained=None)
