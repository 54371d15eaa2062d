"""BEiT checkpoint conversion: unilm pretrained-only/fine-tuned/ADE20K, mmseg and mmpretrain layouts, the CLI, and
loading through the 640 UPerNet config (zero missing backbone keys; wrong keys fail loudly)."""
import os
import sys

import pytest
import torch
from mmengine.config import Config

from beit_mm.apis.convert import ConversionError, ConversionUsageError, convert_checkpoint
from beit_mm.converters.beit import convert_beit
from beit_mm.fileio import CheckpointFileError
from beit_mm.models.backbones import BEiT
from beit_mm.registry import MODELS

from ..conftest import ROOT, load_tool, randomize_, run_tool

TINY = dict(embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2.0)


def unilm_pretrain_state_dict(arch=TINY, img_size=224, patch=16, vocab=64, seed=0):
    """A state dict with the key names and shapes of unilm's pretrained-only files (beit_*_pt22k.pth): shared
    relative position bias with its index, mask token, final norm, lm_head; random values."""
    m = randomize_(BEiT(arch=arch, img_size=img_size, patch_size=patch, use_rel_pos_bias=False,
                        use_shared_rel_pos_bias=True, with_mask_token=True, final_norm=True), seed=seed, std=0.02)
    sd = m.state_dict()
    n = (img_size // patch) ** 2 + 1
    sd['rel_pos_bias.relative_position_index'] = torch.randint(0, 10, (n, n))
    sd['lm_head.weight'] = torch.randn(vocab, arch['embed_dims'])
    sd['lm_head.bias'] = torch.zeros(vocab)
    return sd


def test_unilm_pretrained_only_expands_shared_bias():
    src = unilm_pretrain_state_dict()
    out = convert_beit(src, 'unilm')
    assert 'lm_head.weight' not in out and 'mask_token' not in out and not any('relative_position_index' in k
                                                                             for k in out)
    for i in range(2):
        assert torch.equal(out[f'blocks.{i}.attn.relative_position_bias_table'],
                           src['rel_pos_bias.relative_position_bias_table'])
    model = BEiT(arch=TINY, img_size=224, final_norm=True)
    model.load_state_dict(out, strict=True)
    kept = convert_beit(src, 'unilm', keep_mim_head=True, expand_shared_bias=False)
    assert {'lm_head.weight', 'mask_token', 'rel_pos_bias.relative_position_bias_table'} <= set(kept)


def test_unilm_ade20k_layout_and_resize():
    """backbone.-prefixed unilm ADE20K files lose their fpn/heads; --img-size resamples tables to the new grid."""
    model = randomize_(BEiT(arch=TINY, img_size=64, use_abs_pos_emb=True))
    src = {f'backbone.{k}': v for k, v in model.state_dict().items()}
    src['backbone.fpn1.0.weight'] = torch.zeros(1)
    src['decode_head.conv_seg.weight'] = torch.zeros(1)
    out = convert_beit(src, 'unilm')
    BEiT(arch=TINY, img_size=64, use_abs_pos_emb=True).load_state_dict(out, strict=True)
    resized = convert_beit(src, 'unilm', img_size=128)
    assert resized['blocks.0.attn.relative_position_bias_table'].shape == ((2 * 8 - 1) ** 2 + 3, 2)
    assert resized['pos_embed'].shape == (1, 65, 32)
    BEiT(arch=TINY, img_size=128, use_abs_pos_emb=True).load_state_dict(resized, strict=True)


@pytest.mark.parametrize('final_norm', [False, True])
def test_mmseg_layout_parity(final_norm):
    """mmseg 1.2.2's BEiT (reference) with random weights -> convert -> same feature maps, max|diff| <= 1e-4."""
    from mmseg.models.backbones import BEiT as MMSegBEiT
    ref = randomize_(MMSegBEiT(img_size=32, patch_size=16, embed_dims=32, num_layers=2, num_heads=2, mlp_ratio=2,
                               out_indices=(0, 1), qv_bias=True, drop_path_rate=0.0, init_values=0.1,
                               norm_cfg=dict(type='LN', eps=1e-6), final_norm=final_norm))
    ref.eval()  # mmseg's BEiT.train() returns None, so no chaining
    ours = BEiT(arch=TINY, img_size=32, out_indices=(0, 1), final_norm=final_norm, drop_path_rate=0.0).eval()
    ours.load_state_dict(convert_beit(ref.state_dict(), 'mmseg'), strict=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        for a, b in zip(ref(x), ours(x)):
            assert (a - b).abs().max() < 1e-4


def test_mmpretrain_layout_parity():
    """mmpretrain 1.2.0's BEiTViT (reference, shared bias as in its pretraining) -> convert -> same feature maps."""
    from mmpretrain.models.backbones import BEiTViT
    ref = randomize_(BEiTViT(arch=dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
                             img_size=32, patch_size=16, out_indices=(0, 1), use_abs_pos_emb=False,
                             use_rel_pos_bias=False, use_shared_rel_pos_bias=True, layer_scale_init_value=0.1,
                             out_type='featmap', final_norm=True))
    ref.eval()
    sd = {f'backbone.{k}': v for k, v in ref.state_dict().items()}
    ours = BEiT(arch=TINY, img_size=32, out_indices=(0, 1), final_norm=True, use_rel_pos_bias=False,
                use_shared_rel_pos_bias=True, drop_path_rate=0.0).eval()
    ours.load_state_dict(convert_beit(sd, 'mmpretrain', expand_shared_bias=False), strict=True)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        for a, b in zip(ref(x), ours(x)):
            assert (a - b).abs().max() < 1e-4


def test_wrong_source_fails_loudly():
    hf_like = {'beit.encoder.layer.0.attention.attention.query.weight': torch.zeros(2, 2)}
    with pytest.raises(ValueError, match='--source hf'):
        convert_beit(hf_like, 'unilm')
    with pytest.raises(ValueError, match='unknown BEiT checkpoint source'):
        convert_beit({}, 'caffe')


def test_flags_that_do_not_go_together_are_usage_errors(tmp_path, capsys):
    """``convert_checkpoint`` raises ConversionUsageError for a missing or foreign ``--model``/``--source``; the tool
    reports it as argparse does (usage, ``<prog>: error: ...``, exit 2) before anything is read."""
    tool = load_tool('tools/convert_checkpoint.py')
    src, dst = str(tmp_path / 'a.pth'), str(tmp_path / 'b.pth')
    for argv, message in (([src, dst], '--model and --source are required (or --to hf|timm for the other way)'),
                          (['--model', 'cvt', '--source', 'unilm', src, dst],
                           "--source unilm is not a cvt layout; choose one of ('official', 'hf')")):
        with pytest.raises(SystemExit) as stopped:
            tool.main(argv)
        assert stopped.value.code == 2 and f': error: {message}\n' in capsys.readouterr().err  # prog: the script's name
    with pytest.raises(ConversionUsageError, match='--source unilm is not a cvt layout'):
        convert_checkpoint(src, dst, model='cvt', source='unilm')


def test_a_missing_official_file_names_where_it_is_published(tmp_path, monkeypatch):
    """Converting an official file not yet downloaded names where it is published and the converter command from the
    model index (``Converted From``); a file no index names keeps the plain message."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConversionError) as refused:
        convert_checkpoint('beit_base_patch16_224_pt22k.pth', 'out.pth', model='beit', source='unilm')
    message = str(refused.value)
    assert 'beit_base_patch16_224_pt22k.pth does not exist' in message
    assert 'published at https://github.com/microsoft/unilm/tree/master/beit' in message
    assert ('run: python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth '
            'checkpoints/beit-base_pt22k.pth') in message
    with pytest.raises(ConversionError, match='mine.pth does not exist. Fix: check the path'):
        convert_checkpoint('mine.pth', 'out.pth', model='beit', source='unilm')
    assert not (tmp_path / 'out.pth').exists()


def _segmentor_from_config(path: str, checkpoint: str):
    cfg = Config.fromfile(path)
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    cfg.model.neck.norm_cfg = cfg.model.decode_head.norm_cfg = cfg.model.auxiliary_head.norm_cfg = dict(type='BN')
    from mmseg.registry import MODELS as MMSEG_MODELS
    from mmengine.registry import init_default_scope
    init_default_scope('mmseg')
    return MMSEG_MODELS.build(cfg.model)


def test_unilm_beit_base_pretrained_loads_into_640_config(tmp_path):
    """A BEiT-B checkpoint with unilm's pretrained-only key names converts with the CLI and loads into the 640
    UPerNet config with zero missing backbone keys (shared 14x14 bias -> every block, resampled to 40x40)."""
    src = unilm_pretrain_state_dict(arch=dict(embed_dims=768, num_layers=12, num_heads=12, mlp_ratio=4.0),
                                    vocab=8192)
    torch.save({'model': src}, tmp_path / 'beit_base_patch16_224_pt22k.pth')
    dst = tmp_path / 'beit-base_pt22k.pth'
    run_tool(['tools/convert_checkpoint.py', '--model', 'beit', '--source', 'unilm',
              str(tmp_path / 'beit_base_patch16_224_pt22k.pth'), str(dst)]).check_returncode()
    seg = _segmentor_from_config(os.path.join(ROOT, 'configs/beit/beit-base_upernet_8xb2-160k_ade20k-640x640.py'),
                                 str(dst))
    seg.backbone.init_weights()  # raises on any missing backbone key
    bb = seg.backbone.state_dict()
    assert torch.equal(bb['blocks.5.attn.qkv.weight'], src['blocks.5.attn.qkv.weight'])
    assert torch.equal(bb['patch_embed.proj.weight'], src['patch_embed.proj.weight'])
    table = bb['blocks.11.attn.relative_position_bias_table']
    assert table.shape == (79 * 79 + 3, 12)
    assert torch.equal(table[-3:], src['rel_pos_bias.relative_position_bias_table'][-3:])


def test_wrong_keys_fail_loudly_through_config(tmp_path):
    """An unconverted (HF-layout) file given to the config refuses to train from a random backbone."""
    from transformers import BeitConfig, BeitModel
    hf = BeitModel(BeitConfig(image_size=32, patch_size=16, num_hidden_layers=2, hidden_size=32,
                              num_attention_heads=2, intermediate_size=64), add_pooling_layer=False)
    torch.save(hf.state_dict(), tmp_path / 'hf.pth')
    m = MODELS.build(dict(type='beit_mm.BEiT', arch=TINY, img_size=32,
                          init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'hf.pth'))))
    with pytest.raises(CheckpointFileError, match='HF transformers BEiT state dict.*convert_checkpoint.py --model beit'):
        m.init_weights()
