"""DALLEEncoder, map_pixels and the DALL-E converter against OpenAI's ``dall_e.encoder.Encoder`` (``dall-e`` 0.1, random
weights and biases; logits <= 1e-4, identical ids) and mmpretrain 1.2.0's ``DALL-E`` for the 'mmpretrain' layout."""
import warnings

import pytest
import torch
import torch.nn as nn
from dall_e.encoder import Encoder as OpenAIEncoder
from dall_e.utils import logit_laplace_eps as openai_eps
from dall_e.utils import map_pixels as openai_map_pixels

from beit_mm.converters.dalle import convert_dalle, load_openai_encoder
from beit_mm.models.tokenizers.dalle import LOGIT_LAPLACE_EPS, DALLEEncoder, map_pixels
from beit_mm.registry import MODELS

SMALL = dict(n_hid=64, n_blk_per_group=1, vocab_size=512)  # dall_e validators: n_hid >= 64, vocab_size >= 512


def _openai_encoder(seed: int, **sizes) -> nn.Module:
    torch.manual_seed(seed)
    enc = OpenAIEncoder(**sizes, device=torch.device('cpu'), requires_grad=False)
    with torch.no_grad():
        for name, p in enc.named_parameters():
            if name.endswith('.b'):
                p.normal_(std=0.1)
    return enc


def _ours_from(enc: nn.Module, **kwargs) -> DALLEEncoder:
    ours = DALLEEncoder(**kwargs)
    ours.load_state_dict(convert_dalle(enc.state_dict(), 'openai'), strict=True)
    return ours


def _images(batch: int, size: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return map_pixels(torch.rand(batch, 3, size, size, generator=g))


@pytest.mark.parametrize('channels_last', [False, True])
def test_parity_small(channels_last):
    enc = _openai_encoder(0, **SMALL)
    ours = _ours_from(enc, **SMALL, channels_last=channels_last)
    x = _images(2, 48)
    ref = enc(x)
    out = ours(x)
    assert out.shape == (2, 512, 6, 6) and out.dtype == torch.float32
    assert (out - ref).abs().max().item() <= 1e-4
    ids = ours.get_token_ids(x)
    assert ids.shape == (2, 36) and ids.dtype == torch.int64
    assert torch.equal(ids, ref.argmax(1).flatten(1))


def test_parity_default_sizes():
    enc = _openai_encoder(1)
    ours = _ours_from(enc)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in enc.parameters())
    x = _images(2, 32, seed=1)
    ref = enc(x)
    out = ours(x)
    assert out.shape == (2, 8192, 4, 4)
    assert (out - ref).abs().max().item() <= 1e-4
    assert torch.equal(ours.get_token_ids(x), ref.argmax(1).flatten(1))


def test_bf16_autocast_close_to_fp32():
    enc = _openai_encoder(2, **SMALL)
    ours = _ours_from(enc, **SMALL, autocast_dtype='bfloat16')
    x = _images(2, 32, seed=2)
    out = ours(x)
    ref = enc(x)
    assert out.dtype == torch.float32  # the output conv runs in fp32, as dall_e's use_float16=False
    rel = (out - ref).norm() / ref.norm()
    assert rel.item() < 0.05
    assert (out.argmax(1) == ref.argmax(1)).float().mean().item() >= 0.8
    with pytest.raises(ValueError, match='autocast_dtype'):
        DALLEEncoder(**SMALL, autocast_dtype='fp8')


def test_map_pixels():
    assert LOGIT_LAPLACE_EPS == openai_eps == 0.1
    x = torch.tensor([0.0, 0.25, 0.5, 1.0]).view(1, 1, 2, 2)
    torch.testing.assert_close(map_pixels(x), torch.tensor([0.1, 0.3, 0.5, 0.9]).view(1, 1, 2, 2))
    y = torch.rand(2, 3, 4, 4)
    torch.testing.assert_close(map_pixels(y), openai_map_pixels(y), rtol=0, atol=0)
    with pytest.raises(ValueError, match='255'):
        map_pixels(torch.zeros(1, 3, 2, 2, dtype=torch.uint8))


def test_frozen_and_eval():
    ours = DALLEEncoder(**SMALL)
    parent = nn.Sequential(nn.Linear(2, 2), ours)
    parent.train()
    assert not ours.training and all(not m.training for m in ours.modules())
    assert all(not p.requires_grad for p in ours.parameters())
    x = _images(1, 16).requires_grad_(True)
    out = ours(x)
    assert not out.requires_grad
    with pytest.raises(ValueError, match='divisible by 8'):
        ours(_images(1, 20))
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\)'):
        ours(torch.zeros(1, 1, 16, 16))


def test_openai_pickle_round_trip(tmp_path):
    enc = _openai_encoder(3, **SMALL)
    path = tmp_path / 'encoder.pkl'
    torch.save(enc, path)  # the official file is a pickled whole module
    with pytest.warns(UserWarning, match='unpickling'):
        sd = load_openai_encoder(str(path))
    assert 'blocks.input.w' in sd and 'blocks.output.conv.b' in sd
    converted = convert_dalle(sd, 'openai')
    assert 'blocks.group_2.block_1.id_path.weight' in converted
    assert 'blocks.group_1.block_1.res_path.conv_4.bias' in converted
    ours = DALLEEncoder(**SMALL)
    ours.load_state_dict(converted, strict=True)
    x = _images(1, 16, seed=3)
    assert (ours(x) - enc(x)).abs().max().item() <= 1e-4


def test_pretrained_init_cfg(tmp_path):
    enc = _openai_encoder(4, **SMALL)
    path = tmp_path / 'dalle_encoder_beit_mm.pth'
    torch.save(convert_dalle(enc.state_dict(), 'openai'), path)
    ours = MODELS.build(dict(type='DALLEEncoder', **SMALL, init_cfg=dict(type='Pretrained', checkpoint=str(path))))
    ours.init_weights()
    x = _images(1, 16, seed=4)
    assert (ours(x) - enc(x)).abs().max().item() <= 1e-4
    assert all(not p.requires_grad for p in ours.parameters())
    # strict: a checkpoint for other sizes fails loudly instead of silently keeping random weights
    bad = DALLEEncoder(n_hid=64, n_blk_per_group=2, vocab_size=512,
                       init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    with pytest.raises(RuntimeError):
        bad.init_weights()


def test_mmpretrain_layout():
    from mmpretrain.models.selfsup.cae import DALLEEncoder as MMPretrainDALLE
    from mmpretrain.registry import MODELS as MMPRETRAIN_MODELS

    assert MMPRETRAIN_MODELS.get('DALL-E') is MMPretrainDALLE
    torch.manual_seed(5)
    mm = MMPretrainDALLE(**SMALL)
    with torch.no_grad():
        for name, p in mm.named_parameters():
            if name.endswith('.b'):
                p.normal_(std=0.1)
    ours = DALLEEncoder(**SMALL)
    ours.load_state_dict(convert_dalle(mm.state_dict(), 'mmpretrain'), strict=True)
    x = _images(1, 16, seed=5)
    assert (ours(x) - mm(x)).abs().max().item() <= 1e-4
    # a whole mmpretrain BEiT checkpoint: take target_generator.* only
    whole = {'backbone.cls_token': torch.zeros(1, 1, 8),
             **{f'target_generator.{k}': v for k, v in mm.state_dict().items()}}
    ours.load_state_dict(convert_dalle(whole, 'mmpretrain'), strict=True)
    with pytest.raises(ValueError, match='--source mmpretrain'):
        convert_dalle(whole, 'openai')


def test_converter_errors():
    sd = _openai_encoder(6, **SMALL).state_dict()
    with pytest.raises(ValueError, match='unknown source'):
        convert_dalle(sd, 'unilm')
    with pytest.raises(ValueError, match=r'1 unexpected keys .*lm_head.weight.*expected a DALL-E encoder'):
        convert_dalle({**sd, 'lm_head.weight': torch.zeros(1)}, 'openai')
    with pytest.raises(ValueError, match='already converted'):
        convert_dalle(convert_dalle(sd, 'openai'), 'openai')
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # the pure converter never warns
        convert_dalle(sd, 'mmpretrain')
