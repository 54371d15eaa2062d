"""tools/infer.py (mmseg's MMSegInferencer on a beit_mm config): overlays and label maps for a folder and a file,
and the label maps equal the segmentor's own prediction through mmseg.apis.inference_model."""
import os
import os.path as osp

import numpy as np
import torch
from mmengine.config import Config, ConfigDict
from PIL import Image

from beit_mm.data.demo import make_demo_ade20k
from beit_mm.apis import build_from_config

from .conftest import ROOT, load_tool

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
    preds = load_tool('tools/infer.py').infer(CONFIG, str(work_dir), [val, osp.join(val, images[0])], str(out))
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
