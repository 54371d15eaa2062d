"""The trainable dVAE tokenizer, its annealing hook, encoder export and demo config: the decoder against OpenAI's
``dall_e.decoder.Decoder``, the NLL and KL against ``torch.distributions`` (fp32 1e-4), the exported encoder exact."""
import json
import math
import os
import re

import pytest
import torch
import torch.distributions as D
from mmengine.config import Config

from beit_mm.converters.dvae import extract_dvae_encoder
from beit_mm.data.demo.ade20k import make_demo_ade20k
from beit_mm.engine.hooks import DVAEScheduleHook, cosine_anneal
from beit_mm.models.tokenizers import DALLEEncoder
from beit_mm.models.tokenizers.dalle import map_pixels
from beit_mm.models.tokenizers import (DVAE, DALLEDecoder, codebook_perplexity, codebook_usage, logit_laplace_nll)

from ..conftest import ROOT, randomize_, run_tool

DEMO = os.path.join(ROOT, 'configs/demo/dvae-tiny_1xb16-0.2k_ade20k-demo-48px.py')
FULL = os.path.join(ROOT, 'configs/dvae/dvae_8xb64-3000k_in1k-256px.py')
TINY = dict(group_count=2, n_hid=16, n_blk_per_group=1, vocab_size=32)


def test_decoder_matches_dall_e():
    from dall_e.decoder import Decoder
    ours = randomize_(DALLEDecoder(group_count=4, n_init=16, n_hid=64, n_blk_per_group=1, vocab_size=512), std=0.05)
    ref = Decoder(n_init=16, n_hid=64, n_blk_per_group=1, vocab_size=512, requires_grad=False)
    renamed = {k.replace('.weight', '.w').replace('.bias', '.b'): v for k, v in ours.state_dict().items()}
    ref.load_state_dict(renamed, strict=True)
    z = torch.softmax(torch.randn(2, 512, 2, 2, generator=torch.Generator().manual_seed(0)), dim=1)
    with torch.no_grad():
        out, expected = ours(z), ref(z)
    assert out.shape == (2, 6, 16, 16)
    assert (out - expected).abs().max() <= 1e-4


def test_logit_laplace_nll_matches_torch_distributions():
    g = torch.Generator().manual_seed(1)
    x = map_pixels(torch.rand(2, 3, 4, 4, generator=g))
    mu, log_b = torch.randn(2, 3, 4, 4, generator=g), 0.5 * torch.randn(2, 3, 4, 4, generator=g)
    ref = D.TransformedDistribution(D.Laplace(mu, log_b.exp()), [D.transforms.SigmoidTransform()])
    assert (logit_laplace_nll(x, mu, log_b) + ref.log_prob(x)).abs().max() <= 1e-4


def test_codebook_statistics_by_hand():
    # position 1: all mass on code 0; position 2: half on codes 1 and 2 -> average (0.5, 0.25, 0.25, 0)
    logits = torch.tensor([[100., 0., 0., 0.], [0., 100., 100., 0.]]).t().reshape(1, 4, 1, 2)
    assert abs(codebook_perplexity(logits).item() - 2**1.5) <= 1e-5  # exp(0.5 ln 2 + 0.5 ln 4)
    assert codebook_usage(logits).item() == 0.5  # argmax codes {0, 1} of 4
    assert abs(codebook_perplexity(torch.zeros(3, 16, 2, 2)).item() - 16) <= 1e-4  # uniform -> the vocab size


def test_kl_and_loss_terms():
    torch.manual_seed(0)
    model = DVAE(**TINY, decoder_n_init=16, kl_weight=2.5, temperature=0.5)
    x = torch.rand(2, 3, 16, 16)
    out = model.loss(x)
    logits = model.encode(x)  # (2, 32, 8, 8)
    q = D.Categorical(logits=logits.permute(0, 2, 3, 1))
    kl = D.kl_divergence(q, D.Categorical(logits=torch.zeros_like(logits.permute(0, 2, 3, 1))))
    assert abs(out['kl'].item() - kl.mean().item()) <= 1e-5
    expected = 2.5 * kl.flatten(1).sum(1).mean() / (3 * 16 * 16)
    assert abs(out['loss_kl'].item() - expected.item()) <= 1e-6
    assert set(out) == {'loss_rec', 'loss_kl', 'kl', 'perplexity', 'codebook_usage'}
    # l2: one statistic per channel, the loss is the MSE of sigmoid(mu) against [0, 1] pixels
    l2 = DVAE(**TINY, decoder_n_init=16, rec_loss='l2')
    assert l2.decoder.blocks.output.conv.out_channels == 3
    with pytest.raises(ValueError, match='rec_loss'):
        DVAE(**TINY, rec_loss='bce')


def test_usage_term_is_the_aggregate_kl_and_spreads_the_codes():
    """``loss_usage`` = usage_weight * KL(mean softmax over batch and positions || uniform), by torch.distributions;
    a few steps on it alone raise the number of distinct argmax codes of a collapsed encoder."""
    torch.manual_seed(0)
    model = DVAE(**TINY, decoder_n_init=16, usage_weight=0.7)
    x = torch.rand(4, 3, 16, 16)
    out = model.loss(x)
    q_bar = torch.softmax(model.encode(x), dim=1).mean(dim=(0, 2, 3))
    uniform = D.Categorical(probs=torch.full_like(q_bar, 1 / q_bar.numel()))
    assert abs(out['loss_usage'].item() - 0.7 * D.kl_divergence(D.Categorical(probs=q_bar), uniform).item()) <= 1e-5
    assert 'loss_usage' not in DVAE(**TINY, decoder_n_init=16).loss(x)  # DALL-E's objective by default
    with torch.no_grad():  # collapse the encoder: one code wins everywhere
        model.encoder.blocks.output.conv.bias.copy_(torch.arange(TINY['vocab_size']).float() * 5)
    before = codebook_usage(model.encode(x)).item()
    opt = torch.optim.Adam(model.encoder.parameters(), lr=1e-2)
    for _ in range(100):
        opt.zero_grad()
        model.loss(x)['loss_usage'].backward()
        opt.step()
    assert codebook_usage(model.encode(x)).item() > 4 * before, before


def test_a_few_steps_reduce_reconstruction_loss():
    torch.manual_seed(0)
    model = DVAE(**TINY, decoder_n_init=16, kl_weight=0.0, temperature=1.0)
    x = torch.rand(4, 3, 8, 8).repeat_interleave(2, 2).repeat_interleave(2, 3)  # 16x16, some structure

    def eval_rec() -> float:
        torch.manual_seed(123)  # same Gumbel noise each time
        with torch.no_grad():
            return model.loss(x)['loss_rec'].item()

    before = eval_rec()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(30):
        loss = sum(v for k, v in model.loss(x).items() if k.startswith('loss'))
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = eval_rec()
    assert after < before - 0.05, (before, after)


def test_annealing_schedule_values():
    assert cosine_anneal(1.0, 1 / 16, 0, 100) == 1.0
    assert abs(cosine_anneal(1.0, 1 / 16, 50, 100) - (1 + 1 / 16) / 2) <= 1e-12
    assert abs(cosine_anneal(1.0, 1 / 16, 25, 100) - (1 / 16 + (15 / 16) * (1 + math.cos(math.pi / 4)) / 2)) <= 1e-12
    assert cosine_anneal(1.0, 1 / 16, 100, 100) == cosine_anneal(1.0, 1 / 16, 10**6, 100) == 1 / 16
    hook = DVAEScheduleHook(temperature=(1.0, 1 / 16), temperature_iters=150, kl_weight=(0.0, 6.6), kl_weight_iters=20)
    assert hook.values(0) == (1.0, 0.0)
    tau, beta = hook.values(10)
    assert abs(beta - 3.3) <= 1e-12 and abs(tau - cosine_anneal(1.0, 1 / 16, 10, 150)) <= 1e-12
    assert hook.values(200) == (1 / 16, 6.6)


def test_extract_encoder_loads_strictly_into_dalle_encoder():
    torch.manual_seed(0)
    model = randomize_(DVAE(**TINY, decoder_n_init=16), std=0.05)
    sd = extract_dvae_encoder({'module.' + k: v for k, v in model.state_dict().items()})
    assert not any(k.startswith(('encoder.', 'decoder.')) for k in sd)
    tokenizer = DALLEEncoder(**TINY)
    tokenizer.load_state_dict(sd, strict=True)
    x = torch.rand(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(tokenizer.get_token_ids(map_pixels(x)), model.encode(x).argmax(1).flatten(1))
        assert (tokenizer(map_pixels(x)) - model.encode(x)).abs().max() <= 1e-5
    with pytest.raises(ValueError, match='whole checkpoint'):
        extract_dvae_encoder({'state_dict': model.state_dict(), 'meta': {}})
    with pytest.raises(ValueError, match='no encoder.blocks'):
        extract_dvae_encoder({'backbone.cls_token': torch.zeros(1)})


def test_configs_match_the_mim_demo_and_dall_e():
    demo, full = Config.fromfile(DEMO), Config.fromfile(FULL)
    mim = Config.fromfile(os.path.join(ROOT, 'configs/demo/beit_beit-tiny-p16_1xb16-coslr-0.3k_ade20k-demo-96px.py'))
    assert demo.tokenizer == mim.tokenizer
    assert {k: demo.model[k] for k in mim.tokenizer} == mim.tokenizer
    assert demo.train_dataloader.dataset.pipeline[1].scale == mim.img_size // 2 == 48
    assert full.tokenizer == dict(group_count=4, n_hid=256, n_blk_per_group=2, vocab_size=8192)
    hook = full.custom_hooks[0]
    assert (hook.temperature, hook.kl_weight) == ((1.0, 1 / 16), (0.0, 6.6))


def test_demo_config_trains_through_tools_train(tmp_path):
    """2 iterations of the demo config (data root, batch and iteration count overridden only), then export."""
    make_demo_ade20k(str(tmp_path / 'ade'), num_train=4, num_val=1, size=64, seed=0)
    cfg = Config.fromfile(DEMO)
    cfg.work_dir = str(tmp_path / 'work')
    dl = cfg.train_dataloader
    dl.num_workers, dl.persistent_workers, dl.batch_size = 0, False, 4
    dl.dataset.data_root = str(tmp_path / 'ade')
    cfg.train_cfg.max_iters = 2
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = 2
    assert cfg.custom_hooks[1].type == 'beit_mm.TokenizerEvalHook'  # held-out folder follows data_root
    cfg.dump(str(tmp_path / 'dvae.py'))
    proc = run_tool(['tools/train.py', str(tmp_path / 'dvae.py')])
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert re.search(r'Iter\(train\) \[2/2\].*temperature: \d.*kl_weight: \d.*loss_rec: -?\d.*perplexity: \d.*'
                     r'codebook_usage: \d', log), log[-2000:]
    state = torch.load(tmp_path / 'work' / 'iter_2.pth', map_location='cpu', weights_only=True)['state_dict']
    DALLEEncoder(**cfg.tokenizer).load_state_dict(extract_dvae_encoder(state), strict=True)
    # the held-out evaluation ran after the last iteration: numbers in the log line and a JSON, the grid PNG
    assert re.search(r'Iter\(train\) \[2/2\].*heldout_usage: \d.*heldout_perplexity: \d.*heldout_psnr: \d', log)
    held = json.loads((tmp_path / 'work' / 'tokenizer_eval' / 'iter_2.json').read_text())
    assert 0 < held['usage'] <= 1 and held['num_images'] == 1 and os.path.isfile(held['grid'])
