"""beit_mm -> HF transformers / timm (``tools/convert_checkpoint.py --to hf|timm``, ``beit_mm.apis.hub``) and back.

The HF/timm model loaded by its own ``from_pretrained`` / ``create_model`` from what the converter wrote matches the
beit_mm model: fp32 max |diff| <= 1e-4, no missing or unexpected key, beit_mm -> HF -> beit_mm bit-identical. Models
(random, shrunk from the named configs): the MIM backbone, the BEiT classifier, BEiT + UPerNet (the published feature
blocks 3, 5, 7, 11 refused with the reason) and the CvT classifier (QuickGELU and depths 1/1/2 refused)."""
import json
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis import build_from_config
from beit_mm.apis.convert import convert_checkpoint
from beit_mm.apis.hub import hf_model_and_state_dict, load_hf_state_dict
from beit_mm.converters.hf_config import HFIncompatible

from ..conftest import ROOT

MIM = osp.join(ROOT, 'configs', 'demo', 'beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py')
BEIT_CLS = osp.join(ROOT, 'configs', 'beit', 'beit-base-p16_beit-pre_8xb128-coslr-100e_in1k.py')
BEIT_SEG = osp.join(ROOT, 'configs', 'beit', 'beit-base_upernet_8xb2-160k_ade20k-512x512.py')
CVT_CLS = osp.join(ROOT, 'configs', 'demo', 'cvt-13-tiny_1xb32-30e_in1k-demo-64px.py')
TOL = 1e-4
SMALL_BEIT = dict(_delete_=True, embed_dims=64, num_layers=6, num_heads=2, mlp_ratio=4.0)


def _randomized(cfg: Config, seed: int = 0):
    torch.manual_seed(seed)
    model = build_from_config(cfg)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        for name, p in model.named_parameters():
            if 'relative_position_bias_table' in name or name.endswith(('gamma_1', 'gamma_2', 'mask_token')):
                p.normal_(0, 0.5)
            elif name.endswith('bias') or 'norm' in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def _save(tmp_path, cfg: Config, model, classes=None) -> tuple[str, str]:
    config = str(tmp_path / 'config.py')
    cfg.dump(config)
    ckpt = str(tmp_path / 'model.pth')
    meta = {'cfg': cfg.pretty_text}
    if classes:
        meta['dataset_meta'] = {'classes': classes}
    torch.save({'state_dict': model.state_dict(), 'meta': meta}, ckpt)
    return config, ckpt


def _to_hf(tmp_path, ckpt: str, **options) -> str:
    return convert_checkpoint(ckpt, str(tmp_path / 'hf'), to='hf', **options)


def _from_pretrained(cls, folder: str, unexpected: tuple = ()):
    """``cls.from_pretrained(folder)``, asserting no missing/mismatched key and no unexpected key but ``unexpected``
    (a task head that the base class of a task folder leaves out, as HF reports it)."""
    model, info = cls.from_pretrained(folder, output_loading_info=True)
    assert not info['missing_keys'] and not info['mismatched_keys'], info
    assert sorted(info['unexpected_keys']) == sorted(unexpected), info
    return model.eval()


def _assert_round_trip(ours: dict, folder: str) -> None:
    back = load_hf_state_dict(folder)
    assert back.keys() == ours.keys(), (sorted(set(ours) ^ set(back)))[:8]
    different = [k for k in ours if not torch.equal(ours[k], back[k])]
    assert not different, different[:5]


def _close(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    diff = float((a - b).abs().max())
    assert diff <= TOL, diff
    return diff


def test_mim_backbone_to_hf_beit_model_and_timm(tmp_path):
    from transformers import BeitModel
    import timm
    cfg = Config.fromfile(MIM)
    model = _randomized(cfg)
    config, ckpt = _save(tmp_path, cfg, model)
    folder = _to_hf(tmp_path, ckpt, config=config)
    hf_config = json.load(open(osp.join(folder, 'config.json')))
    assert hf_config['architectures'] == ['BeitModel'] and hf_config['use_shared_relative_position_bias']
    hf = _from_pretrained(BeitModel, folder)
    backbone = model.backbone
    x = torch.randn(2, 3, 96, 96)  # the config's img_size (HF resamples tables bilinearly at other sizes)
    mask = torch.rand(2, 36) > 0.5
    with torch.no_grad():
        ours = backbone.forward_tokens(x)[0][-1]
        ours_masked = backbone.forward_tokens(x, mask)[0][-1]
        theirs = hf(x).last_hidden_state
        theirs_masked = hf(x, bool_masked_pos=mask).last_hidden_state
    print(f'MIM backbone -> BeitModel: max |diff| {_close(ours, theirs):.2e}, '
          f'masked {_close(ours_masked, theirs_masked):.2e}')
    _assert_round_trip({k: v for k, v in backbone.state_dict().items()}, folder)

    out = str(tmp_path / 'timm' / 'beit.pth')
    convert_checkpoint(ckpt, out, to='timm', config=config)
    args = json.load(open(osp.join(tmp_path, 'timm', 'beit.json')))
    assert args['model_name'].startswith('beit_') and args['pretrained_cfg_overlay']['file'] == osp.abspath(out)
    tm = timm.create_model(**args).eval()  # pretrained=True: timm's strict load of the file
    with torch.no_grad():
        print(f'MIM backbone -> timm {args["model_name"]}: max |diff| '
              f'{_close(ours, tm.forward_features(x)):.2e}')


def test_beit_classifier_to_hf_and_timm(tmp_path):
    from transformers import BeitForImageClassification, BeitModel
    import timm
    cfg = Config.fromfile(BEIT_CLS)
    cfg.model.backbone.update(arch=SMALL_BEIT, img_size=64)
    cfg.model.neck.in_channels = 64
    cfg.model.head.update(in_channels=64, num_classes=5)
    model = _randomized(cfg)
    torch.nn.init.normal_(model.head.fc.weight, std=1.0)  # logits of order 1, not the recipe's 2e-5 init
    classes = ['cat', 'dog', 'car', 'tree', 'sky']
    config, ckpt = _save(tmp_path, cfg, model, classes)
    folder = _to_hf(tmp_path, ckpt, config=config)
    config_json = json.load(open(osp.join(folder, 'config.json')))
    assert config_json['id2label'] == {str(i): c for i, c in enumerate(classes)}
    hf = _from_pretrained(BeitForImageClassification, folder)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours = model.head(model.neck(model.backbone(x)))
        theirs = hf(x).logits
    print(f'BEiT classifier -> BeitForImageClassification: max |diff| {_close(ours, theirs):.2e}')
    # the backbone of the same folder (pooler = fc_norm); HF leaves out (and reports) the classifier
    base = _from_pretrained(BeitModel, folder, unexpected=('classifier.weight', 'classifier.bias'))
    with torch.no_grad():
        _close(model.neck(model.backbone(x))[0], base(x).pooler_output)
    ours_sd = {k: v for k, v in model.backbone.state_dict().items()}
    ours_sd.update({f'fc_norm.{k}': v for k, v in model.neck.fc_norm.state_dict().items()})
    ours_sd.update({f'head.{k}': v for k, v in model.head.fc.state_dict().items()})
    _assert_round_trip(ours_sd, folder)

    out = str(tmp_path / 'timm' / 'beit_cls.pth')
    convert_checkpoint(ckpt, out, to='timm', config=config, beitv2=True)
    args = json.load(open(osp.join(tmp_path, 'timm', 'beit_cls.json')))
    assert args['model_name'].startswith('beitv2_')
    tm = timm.create_model(**args).eval()
    with torch.no_grad():
        print(f'BEiT classifier -> timm {args["model_name"]}: max |diff| {_close(ours, tm(x)):.2e}')


def _hf_compatible_segmentor_cfg() -> Config:
    cfg = Config.fromfile(BEIT_SEG)
    cfg.model.backbone.update(arch=SMALL_BEIT, img_size=64, out_indices=(1, 2, 3, 4))
    cfg.model.neck.embed_dim = 64
    cfg.model.decode_head.update(in_channels=[64] * 4, channels=64, num_classes=7)
    cfg.model.auxiliary_head.update(in_channels=64, channels=32, num_classes=7)
    return cfg


def test_beit_upernet_to_hf_semantic_segmentation(tmp_path):
    from transformers import BeitForSemanticSegmentation
    cfg = _hf_compatible_segmentor_cfg()
    model = _randomized(cfg)
    config, ckpt = _save(tmp_path, cfg, model)
    folder = _to_hf(tmp_path, ckpt, config=config)
    config_json = json.load(open(osp.join(folder, 'config.json')))
    assert config_json['out_indices'] == [3, 4, 5, 6] and len(config_json['id2label']) == 7
    hf = _from_pretrained(BeitForSemanticSegmentation, folder)
    x = torch.randn(2, 3, 64, 64)
    captured = []  # HF computes the auxiliary logits but does not return them without labels
    hf.auxiliary_head.register_forward_hook(lambda module, args, output: captured.append(output))
    with torch.no_grad():
        feats = model.extract_feat(x)
        ours, ours_aux = model.decode_head.forward(feats), model.auxiliary_head.forward(feats)
        out = hf(x)
    print(f'BEiT + UPerNet -> BeitForSemanticSegmentation: max |diff| logits {_close(ours, out.logits):.2e}, '
          f'auxiliary {_close(ours_aux, captured[0]):.2e}')
    assert torch.equal(ours.argmax(1), out.logits.argmax(1))
    _assert_round_trip(model.state_dict(), folder)


def test_segmentor_backbone_to_hf_beit_model(tmp_path):
    """--part backbone of a segmentor (no final norm, per-block tables): BeitModel without its pooler."""
    from transformers import BeitModel
    cfg = _hf_compatible_segmentor_cfg()
    model = _randomized(cfg)
    config, ckpt = _save(tmp_path, cfg, model)
    folder = _to_hf(tmp_path, ckpt, config=config, part='backbone')
    hf, info = BeitModel.from_pretrained(folder, add_pooling_layer=False, output_loading_info=True)
    assert not info['missing_keys'] and not info['unexpected_keys'], info
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours = model.backbone.forward_tokens(x)[0][-1]  # block 4's tokens: HF hidden_states[5]
        theirs = hf.eval()(x, output_hidden_states=True).hidden_states[5]
    print(f'segmentor backbone -> BeitModel: max |diff| {_close(ours, theirs):.2e}')
    _assert_round_trip(model.backbone.state_dict(), folder)


def test_published_beit_upernet_configs_are_refused_with_the_reason():
    """mmseg/unilm's (3, 5, 7, 11): block 11 is the last block, which HF's feature selection cannot reach."""
    cfg = Config.fromfile(BEIT_SEG)
    cfg.model.backbone.update(arch=dict(_delete_=True, embed_dims=64, num_layers=12, num_heads=2, mlp_ratio=4.0),
                              img_size=64)
    cfg.model.neck.embed_dim = 64
    cfg.model.decode_head.update(in_channels=[64] * 4, channels=64)
    cfg.model.auxiliary_head.update(in_channels=64)
    with pytest.raises(HFIncompatible, match=r'block\(s\) \[11\]'):
        hf_model_and_state_dict(build_from_config(cfg))
    cfg.model.decode_head.channels = 32  # and a narrower UPerHead than the backbone
    with pytest.raises(HFIncompatible, match='UPerHead channels 32'):
        hf_model_and_state_dict(build_from_config(cfg))


def test_cvt_classifier_to_hf(tmp_path):
    from transformers import CvtForImageClassification, CvtModel
    cfg = Config.fromfile(CVT_CLS)
    with pytest.raises(HFIncompatible, match='quick_gelu'):
        hf_model_and_state_dict(build_from_config(cfg))
    cfg.model.backbone.act = 'gelu'
    with pytest.raises(HFIncompatible, match=r'stage\(s\) \[1, 2\] with depth <= stage index'):
        hf_model_and_state_dict(build_from_config(cfg))  # the demo's depths (1, 1, 2)
    cfg.model.backbone.arch.depths = [1, 2, 3]
    model = _randomized(cfg)
    config, ckpt = _save(tmp_path, cfg, model)
    folder = _to_hf(tmp_path, ckpt, config=config)
    hf = _from_pretrained(CvtForImageClassification, folder)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours = model.head(model.backbone(x))
        theirs = hf(x).logits
    print(f'CvT classifier -> CvtForImageClassification: max |diff| {_close(ours, theirs):.2e}')
    base = _from_pretrained(CvtModel, folder, unexpected=('layernorm.weight', 'layernorm.bias', 'classifier.weight',
                                                          'classifier.bias'))  # its backbone: cvt.* of the folder
    model.backbone.out_type, model.backbone.out_indices = 'featmap', (2, )
    norm, model.backbone.norm = model.backbone.norm, None
    with torch.no_grad():
        _close(model.backbone(x)[0], base(x).last_hidden_state)
    model.backbone.norm = norm
    ours_sd = {k: v for k, v in model.backbone.state_dict().items()}
    ours_sd.update({f'head.{k}': v for k, v in model.head.fc.state_dict().items()})
    _assert_round_trip(ours_sd, folder)
