"""What a worker-side sampler hands to the data preprocessor must reach it through the pack transform's ``meta_keys``.

The BEiT MIM demo on the draft pipeline (``SampleColorJitter -> DecodeTwoViewRandomResizedCrop -> BEiTMaskGenerator
-> PackInputs``) with ``'color_jitter'`` left out of ``PackInputs``' ``meta_keys``.
"""
from __future__ import annotations

import re
import warnings

import torch
from mmcv.transforms import Compose
from mmengine.config import Config
from mmengine.dataset import default_collate

from beit_mm.models.tokenizers import DALLEEncoder

from ..conftest import ROOT

DEMO = f'{ROOT}/configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'


def draft_demo(tmp_path, with_key: bool) -> tuple[Config, dict]:
    """The demo config and its cfg_options for a 2-iteration run on the draft pipeline (``'color_jitter'`` packed
    or not)."""
    from beit_mm.data.demo import make_demo_ade20k
    cfg = Config.fromfile(DEMO)
    pipeline = Config.fromfile(f'{ROOT}/configs/_base_/datasets/imagenet_mim.py').train_pipeline
    pipeline[1].update(size=cfg.img_size, tokenizer_size=cfg.img_size // 2, scale=(0.2, 1.0))
    pipeline[2] = cfg.train_pipeline[4]
    if not with_key:
        pipeline[3]['meta_keys'] = tuple(k for k in pipeline[3]['meta_keys'] if k != 'color_jitter')
    torch.save(DALLEEncoder(**cfg.tokenizer).state_dict(), tmp_path / 'tokenizer.pth')
    root = make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=1, size=128, seed=0)
    return cfg, {
        'model.target_generator.init_cfg.checkpoint': str(tmp_path / 'tokenizer.pth'),
        'train_dataloader.num_workers': 0, 'train_dataloader.persistent_workers': False,
        'train_dataloader.batch_size': 4, 'train_dataloader.dataset.pipeline': pipeline,
        'train_dataloader.dataset.data_root': root, 'train_cfg.max_iters': 2, 'default_hooks.logger.interval': 1,
        'default_hooks.checkpoint.interval': 2}


def test_draft_demo_without_the_jitter_key_trains_silently_without_jitter(tmp_path, mm_warnings):
    """Before the hand-over check: the run ends normally, warns of nothing, and the preprocessor never sees a
    ``color_jitter`` (the packed samples carry none, so the views are only normalized)."""
    from beit_mm.apis.train import train
    from beit_mm.models.selfsup import MIMDataPreprocessor
    cfg, options = draft_demo(tmp_path, with_key=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        train(DEMO, work_dir=str(tmp_path / 'work'), cfg_options=options)
    log = next((tmp_path / 'work').rglob('*.log')).read_text()
    assert re.search(r'Iter\(train\) \[2/2\].*loss: \d', log), log[-2000:]
    jitter_words = [str(w.message) for w in caught if 'jitter' in str(w.message).lower()]
    assert not jitter_words and not [m for m in mm_warnings if 'jitter' in m.lower()]
    assert 'color_jitter' not in log.replace("'color_jitter'", '')  # only the dumped config names it, if anything

    pipeline = Compose(options['train_dataloader.dataset.pipeline'])
    import numpy as np
    path = next((tmp_path / 'ade' / 'images' / 'training').glob('*.jpg'))
    np.random.seed(0)
    packed = pipeline(dict(img_path=str(path)))
    assert 'color_jitter' not in packed['data_samples'].metainfo
    np.random.seed(0)
    drawn = Compose(options['train_dataloader.dataset.pipeline'][:3])(dict(img_path=str(path)))
    assert drawn['color_jitter']['order']  # the sampler did draw a jitter; it is dropped by PackInputs
    pre = MIMDataPreprocessor(mean=[127.5] * 3, std=[127.5] * 3)
    out = pre(default_collate([packed]))['inputs']['images']
    view = torch.from_numpy(drawn['img'][0].copy()).permute(2, 0, 1).flip(0).float()
    torch.testing.assert_close(out[0], (view - 127.5) / 127.5)  # unjittered view
