"""VQ-KD (BEiT v2's tokenizer), its quantizer, teachers and converters against microsoft/unilm at 768a3c87
``beit2/modeling_vqkd.py`` and ``beit2/norm_ema_quantizer.py`` (file and line below), mmpretrain 1.2's ``VQKD``, HF's
``CLIPVisionModelWithProjection`` and timm; token ids identical, features and losses fp32 <= 1e-4."""
from __future__ import annotations

import os.path as osp

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import beit_mm  # noqa: F401
from beit_mm.apis.convert import convert_checkpoint
from beit_mm.converters.vqkd import convert_dino_vit, convert_vqkd
from beit_mm.models.tokenizers.teachers import convert_hf_clip
from beit_mm.models.tokenizers import VQKD, BackboneTeacher, CLIPTeacher, NormEMAQuantizer
from beit_mm.models.tokenizers.evaluation import evaluate_vqkd
from beit_mm.models.tokenizers.quantizer import l2norm, spherical_kmeans

TOL = 1e-4
SMALL = dict(encoder=dict(embed_dims=64, num_layers=2, num_heads=4, mlp_ratio=4.0),
             decoder=dict(embed_dims=48, num_layers=2, num_heads=4, mlp_ratio=4.0),
             img_size=32, patch_size=8, num_codes=16, code_dims=8, out_dims=24)
CLIP_SMALL = dict(image_size=32, patch_size=8, width=32, layers=2, heads=4, output_dim=24)


def images(b: int = 4, size: int = 32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 3, size, size, generator=g) * 255


def randomize_(module: nn.Module, std: float = 0.2, seed: int = 0) -> None:
    """Every parameter random (biases, norms, q/v biases too), so no part of the mapping is tested on zeros/ones."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            norms = ('norm.weight', 'norm1.weight', 'norm2.weight', 'ln1.weight', 'ln2.weight', 'ln_1.weight',
                     'ln_2.weight', 'fc_norm.weight')
            base = 1.0 if name.endswith(norms) else 0.0
            p.copy_(base + std * torch.randn(p.shape, generator=g))


# ------------------------------------------------- unilm rules (norm_ema_quantizer.py, modeling_vqkd.py)
def unilm_kmeans(samples: torch.Tensor, num_clusters: int, num_iters: int = 10):
    """norm_ema_quantizer.py lines 24-32 (sample_vectors) and 34-61 (kmeans, use_cosine_sim=True)."""
    num_samples, dim = samples.shape
    if num_samples >= num_clusters:
        means = samples[torch.randperm(num_samples)[:num_clusters]]
    else:
        means = samples[torch.randint(0, num_samples, (num_clusters, ))]
    for _ in range(num_iters):
        dists = samples @ means.t()
        buckets = dists.max(dim=-1).indices
        bins = torch.bincount(buckets, minlength=num_clusters)
        zero_mask = bins == 0
        bins_min_clamped = bins.masked_fill(zero_mask, 1)
        new_means = buckets.new_zeros(num_clusters, dim, dtype=samples.dtype)
        new_means.scatter_add_(0, buckets[:, None].expand(-1, dim), samples)
        new_means = F.normalize(new_means / bins_min_clamped[..., None], p=2, dim=-1)
        means = torch.where(zero_mask[..., None], means, new_means)
    return means, bins


class UnilmQuantizerRule:
    """norm_ema_quantizer.py NormEMAVectorQuantizer (lines 123-205), state held in plain tensors."""

    def __init__(self, num_codes: int, code_dims: int, decay: float = 0.99, beta: float = 1.0):
        self.weight = torch.zeros(num_codes, code_dims)  # line 76: zeros awaiting k-means
        self.initted = False
        self.cluster_size = torch.zeros(num_codes)  # line 137
        self.decay, self.beta, self.num_codes, self.code_dims = decay, beta, num_codes, code_dims

    def __call__(self, z_bchw: torch.Tensor, training: bool = True):
        z = F.normalize(z_bchw.permute(0, 2, 3, 1), p=2, dim=-1)  # lines 152-153
        z_flattened = z.reshape(-1, self.code_dims)  # line 154
        if training and not self.initted:  # line 156 -> EmbeddingEMA.init_embed_ (lines 91-98)
            self.weight, _ = unilm_kmeans(z_flattened.detach(), self.num_codes, 10)
            self.initted = True
        d = z_flattened.pow(2).sum(dim=1, keepdim=True) + self.weight.pow(2).sum(dim=1) - 2 * torch.einsum(
            'bd,nd->bn', z_flattened, self.weight)  # lines 158-160
        encoding_indices = torch.argmin(d, dim=1)  # line 162
        z_q = F.embedding(encoding_indices, self.weight).view(z.shape)  # line 164
        encodings = F.one_hot(encoding_indices, self.num_codes).type(z.dtype)  # line 166
        if training:  # lines 174-194
            with torch.no_grad():
                bins = encodings.sum(0)
                self.cluster_size = self.cluster_size * self.decay + bins * (1 - self.decay)  # ema_inplace, line 22
                zero_mask = bins == 0
                bins = bins.masked_fill(zero_mask, 1.)
                embed_sum = z_flattened.detach().t() @ encodings
                embed_normalized = F.normalize((embed_sum / bins.unsqueeze(0)).t(), p=2, dim=-1)
                embed_normalized = torch.where(zero_mask[..., None], self.weight, embed_normalized)
                # norm_ema_inplace, lines 119-121
                self.weight = F.normalize(self.weight * self.decay + embed_normalized * (1 - self.decay), p=2, dim=-1)
        loss = self.beta * F.mse_loss(z_q.detach(), z)  # line 197
        z_q = z + (z_q - z).detach()  # line 200
        return z_q.permute(0, 3, 1, 2), loss, encoding_indices  # line 204


def unilm_training_loss(model: VQKD, rule: UnilmQuantizerRule, imgs: torch.Tensor, training: bool = True):
    """modeling_vqkd.py VQKD.forward (lines 201-221) with beit_mm's encoder/decoder/teacher modules: pre_process
    (lines 126-132: x / 127.5 - 1), ScalingLayerForClip (lines 223-231), get_regress_target (lines 179-189: CLIP's
    projected patch tokens), encode (lines 152-164), decode (lines 166-172), calculate_rec_loss (lines 191-199)."""
    x = imgs / 127.5 - 1.0
    clip_in = ((x + 1.) * 127.5).clamp(0, 255.) / 255.
    clip_in = (clip_in - torch.tensor([0.48145466, 0.4578275, 0.40821073])[None, :, None, None]) / torch.tensor(
        [0.26862954, 0.26130258, 0.27577711])[None, :, None, None]
    with torch.no_grad():
        target = model.teacher.visual(clip_in)
    feats = model.encoder.forward_tokens(x)[0][-1][:, 1:]
    to_q = model.encode_task_layer(feats)
    n = to_q.shape[1]
    h = w = int(n**0.5)
    to_q = to_q.transpose(1, 2).reshape(to_q.shape[0], -1, h, w)  # 'b (h w) c -> b c h w'
    quantize, emb_loss, ids = rule(to_q, training)
    dec = model.decoder.forward_tokens(quantize)[0][-1][:, 1:]
    rec = model.decode_task_layer(dec)
    target = target / target.norm(dim=-1, keepdim=True)
    rec = rec / rec.norm(dim=-1, keepdim=True)
    rec_loss = (1 - (target * rec).sum(-1)).mean()
    return emb_loss + rec_loss, emb_loss, rec_loss, ids


def small_vqkd(**kwargs) -> VQKD:
    torch.manual_seed(0)
    model = VQKD(arch=SMALL, teacher=dict(type='CLIPTeacher', **CLIP_SMALL), attn_impl='eager', **kwargs)
    model.init_weights()
    randomize_(model.teacher, std=0.1, seed=3)
    return model


# ------------------------------------------------------------------------------------------------ quantizer
def test_spherical_kmeans_matches_unilm():
    """beit_mm spherical_kmeans == unilm kmeans(use_cosine_sim=True) (norm_ema_quantizer.py lines 24-61), same seed,
    both the without-replacement (N >= K) and the with-replacement (N < K) draws; <= 1e-6."""
    for n, k in ((200, 16), (10, 16)):
        samples = l2norm(torch.randn(n, 8, generator=torch.Generator().manual_seed(n)))
        torch.manual_seed(1)
        ours, bins = spherical_kmeans(samples, k)
        torch.manual_seed(1)
        ref, ref_bins = unilm_kmeans(samples, k)
        torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)
        assert torch.equal(bins, ref_bins)


def test_training_steps_match_unilm_rule():
    """Two training steps (k-means init on the first batch, then plain steps): total loss, commitment and cosine
    losses, ids, codebook after the EMA update, cluster_size and the gradients of the task layers and the encoder ==
    unilm's rule (``unilm_training_loss`` / ``UnilmQuantizerRule`` above, file and lines cited there); <= 1e-4."""
    model = small_vqkd()
    model.train()
    rule = UnilmQuantizerRule(SMALL['num_codes'], SMALL['code_dims'])
    ref_model = small_vqkd()  # same weights, trained by the rule
    ref_model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.5)
    for step in range(3):
        imgs = images(seed=step)
        torch.manual_seed(10 + step)
        losses = model.loss(imgs)
        torch.manual_seed(10 + step)
        ref_total, ref_emb, ref_rec, ref_ids = unilm_training_loss(ref_model, rule, imgs)
        torch.testing.assert_close(losses['loss_quant'], ref_emb, atol=TOL, rtol=0)
        torch.testing.assert_close(losses['loss_rec'], ref_rec, atol=TOL, rtol=0)
        torch.testing.assert_close(model.quantize.embedding.weight, rule.weight, atol=TOL, rtol=0)
        torch.testing.assert_close(model.quantize.cluster_size, rule.cluster_size, atol=TOL, rtol=0)
        assert model.quantize.embedding.initted.item() == 1.0
        opt.zero_grad()
        ref_opt.zero_grad()
        (losses['loss_quant'] + losses['loss_rec']).backward()
        ref_total.backward()
        for (name, p), (_, q) in zip(model.named_parameters(), ref_model.named_parameters()):
            if p.requires_grad:
                assert p.grad is not None, name
                torch.testing.assert_close(p.grad, q.grad, atol=TOL, rtol=1e-3, msg=name)
        opt.step()
        ref_opt.step()
    # the codes in use are the ones the rule assigns
    with torch.no_grad():
        _, _, _, ref_ids = unilm_training_loss(ref_model, rule, images(seed=7), training=False)
    assert torch.equal(model.get_token_ids(images(seed=7)).flatten(), ref_ids)


def test_codebook_not_updated_outside_training():
    """get_token_ids and eval-mode forward leave the codebook and cluster_size untouched."""
    model = small_vqkd()
    model.train()
    model.loss(images())
    before = {k: v.clone() for k, v in model.quantize.state_dict().items()}
    model.get_token_ids(images(seed=1))
    model.eval()
    model.encode(images(seed=2))
    for k, v in model.quantize.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_dead_code_reseeding():
    """dead_code_ratio > 0 replaces codes whose EMA usage fell below ratio x mean by normalized encoder outputs of the
    batch (and sets their usage to the mean); 0 (unilm) leaves unused codes where they are."""
    torch.manual_seed(0)
    k, d = 8, 4
    centers = l2norm(torch.randn(2, d))
    z = (centers[torch.randint(0, 2, (256, ))] + 0.05 * torch.randn(256, d))[None]  # data near 2 directions
    codebook = l2norm(torch.randn(k, d))
    codebook[:2] = centers
    for ratio in (0.0, 0.5):
        q = NormEMAQuantizer(k, d, kmeans_init=False, dead_code_ratio=ratio)
        q.embedding.weight.copy_(codebook)
        q.train()
        _, _, ids = q(z)
        used = torch.zeros(k, dtype=torch.bool)
        used[ids.unique()] = True
        if ratio == 0:
            torch.testing.assert_close(q.embedding.weight[~used], codebook[~used], atol=1e-6, rtol=0)
            continue
        unused = (~used).nonzero().flatten()
        assert len(unused) > 0
        zn = l2norm(z[0])
        for i in unused:  # each re-seeded code is one of the batch's normalized features
            assert (zn - q.embedding.weight[i]).abs().amax(dim=1).min() < 1e-6
        # usage of a re-seeded code = the mean usage before re-seeding: (1 - decay) * 256 assignments / k codes
        torch.testing.assert_close(q.cluster_size[unused], torch.full((len(unused), ), 0.01 * 256 / k), atol=1e-6,
                                   rtol=0)
        # the next batch spreads over more codes than unilm's quantizer would use
        _, _, ids2 = q(z)
        assert ids2.unique().numel() > 2


def test_dead_code_ratio_validated():
    with pytest.raises(ValueError, match='dead_code_ratio'):
        NormEMAQuantizer(8, 4, dead_code_ratio=1.5)


# --------------------------------------------------------------------------------------------------- mmpretrain
MMPRETRAIN_VQKD_ENCODER = dict(  # mmpretrain configs/beitv2/beitv2_beit-base-p16_8xb256-amp-coslr-300e_in1k.py
    arch='base', img_size=224, patch_size=16, in_channels=3, out_indices=-1, drop_rate=0., drop_path_rate=0.,
    norm_cfg=dict(type='LN', eps=1e-6), final_norm=True, out_type='featmap', with_cls_token=True, frozen_stages=-1,
    use_abs_pos_emb=True, use_rel_pos_bias=False, use_shared_rel_pos_bias=False, layer_scale_init_value=0.,
    interpolate_mode='bicubic', patch_cfg=dict(), layer_cfgs=dict(), init_cfg=None)


def test_token_ids_match_mmpretrain(tmp_path):
    """Default arch (ViT-B/16, 8192 x 32): token ids of beit_mm's VQKD == mmpretrain 1.2's VQKD (encoder +
    quantizer, the BEiTv2 config's vqkd_encoder) with the same random weights, converted by
    ``tools/convert_checkpoint.py --model vqkd --source mmpretrain`` and loaded strictly (with_decoder=False)."""
    from mmpretrain.models.selfsup.beit import VQKD as MMPretrainVQKD

    torch.manual_seed(0)
    ref = MMPretrainVQKD(encoder_config=MMPRETRAIN_VQKD_ENCODER, num_embed=8192, embed_dims=32).eval()
    randomize_(ref, std=0.05)
    with torch.no_grad():
        ref.quantize.embedding.weight.copy_(l2norm(torch.randn(8192, 32)))
        ref.quantize.embedding.initted.fill_(1.0)
    src = osp.join(tmp_path, 'mmpretrain_vqkd.pth')
    torch.save({'state_dict': ref.state_dict()}, src)
    dst = osp.join(tmp_path, 'vqkd.pth')
    convert_checkpoint(src, dst, model='vqkd', source='mmpretrain')
    ours = VQKD(with_decoder=False, attn_impl='eager', init_cfg=dict(type='Pretrained', checkpoint=dst))
    ours.init_weights()
    imgs = images(2, 224)
    with torch.no_grad():
        ref_ids = ref(imgs / 127.5 - 1)  # mmpretrain's BEiTv2 feeds the tokenizer x / 127.5 - 1
    ids = ours.get_token_ids(imgs)
    assert ids.dtype == torch.int64 and ids.shape == (2, 196)
    assert torch.equal(ids, ref_ids)
    # and the MIM interface reads target_images
    assert torch.equal(ours.get_targets(dict(target_images=imgs, images=imgs)), ref_ids)


# ------------------------------------------------------------------------------------------------ unilm files
class UnilmVQKDStandIn(nn.Module):
    """A unilm ``run_vqkd_training.py`` model in the official layout: timm's ``Beit`` is unilm
    ``modeling_finetune.VisionTransformer`` (same names: ``blocks.i.attn.qkv``, ``q_bias``, ``v_bias``,
    ``fc_norm`` with mean pooling), plus the quantizer buffers and the teacher/scaling keys unilm saves."""

    def __init__(self, arch: dict, teacher_keys: bool = True):
        super().__init__()
        from timm.models.beit import Beit
        e, dcfg = arch['encoder'], arch['decoder']
        kw = dict(num_classes=0, global_pool='avg', use_abs_pos_emb=True, use_rel_pos_bias=False,
                  use_shared_rel_pos_bias=False, init_values=None, mlp_ratio=4.0)
        self.encoder = Beit(img_size=arch['img_size'], patch_size=arch['patch_size'], embed_dim=e['embed_dims'],
                            depth=e['num_layers'], num_heads=e['num_heads'], **kw)
        grid = arch['img_size'] // arch['patch_size']
        self.decoder = Beit(img_size=grid, patch_size=1, in_chans=arch['code_dims'], embed_dim=dcfg['embed_dims'],
                            depth=dcfg['num_layers'], num_heads=dcfg['num_heads'], **kw)
        self.encode_task_layer = nn.Sequential(nn.Linear(e['embed_dims'], e['embed_dims']), nn.Tanh(),
                                               nn.Linear(e['embed_dims'], arch['code_dims']))
        self.decode_task_layer = nn.Sequential(nn.Linear(dcfg['embed_dims'], dcfg['embed_dims']), nn.Tanh(),
                                               nn.Linear(dcfg['embed_dims'], arch['out_dims']))
        k, c = arch['num_codes'], arch['code_dims']
        self.quantize = nn.Module()
        self.quantize.embedding = nn.Module()
        self.quantize.embedding.weight = nn.Parameter(l2norm(torch.randn(k, c)), requires_grad=False)
        self.quantize.embedding.cluster_size = nn.Parameter(torch.rand(k), requires_grad=False)
        self.quantize.embedding.embed_avg = nn.Parameter(torch.randn(k, c), requires_grad=False)
        self.quantize.embedding.register_buffer('initted', torch.Tensor([True]))
        self.quantize.register_buffer('cluster_size', torch.rand(k))
        if teacher_keys:
            self.teacher_model = nn.Linear(3, 3)
            self.scaling_layer = nn.Module()
            self.scaling_layer.register_buffer('shift', torch.zeros(1, 3, 1, 1))

    @staticmethod
    def patch_tokens(vit, x):
        return vit.fc_norm(vit.forward_features(x)[:, 1:])  # modeling_finetune.py forward_features(return_patch_tokens)

    @torch.no_grad()
    def codebook_indices_and_features(self, imgs):
        """modeling_vqkd.py get_codebook_indices (lines 139-176) and decode (lines 166-172) of the quantized codes."""
        x = imgs / 127.5 - 1
        z = F.normalize(self.encode_task_layer(self.patch_tokens(self.encoder, x)), p=2, dim=-1)
        w = self.quantize.embedding.weight
        d = z.pow(2).sum(-1, keepdim=True) + w.pow(2).sum(1) - 2 * torch.einsum('bnd,kd->bnk', z, w)
        ids = d.argmin(-1)
        zq = F.embedding(ids, w)
        b, n, c = zq.shape
        g = int(n**0.5)
        rec = self.decode_task_layer(self.patch_tokens(self.decoder, zq.transpose(1, 2).reshape(b, c, g, g)))
        return ids, rec, zq


def test_unilm_file_converts_and_matches(tmp_path):
    """A unilm-layout VQ-KD file (``{'model': sd}`` with teacher_model.*, scaling_layer.*, and the quantizer's unused
    EMA buffers) -> ``tools/convert_checkpoint.py --model vqkd --source unilm`` -> ``VQKD(init_cfg=Pretrained)``
    loads strictly; ids identical and decoded features <= 1e-4 vs the unilm-layout model (timm Beit)."""
    torch.manual_seed(0)
    ref = UnilmVQKDStandIn(SMALL).eval()
    randomize_(ref, std=0.1)
    with torch.no_grad():
        ref.quantize.embedding.weight.copy_(l2norm(ref.quantize.embedding.weight))
    src, dst = osp.join(tmp_path, 'unilm.pth'), osp.join(tmp_path, 'vqkd.pth')
    torch.save({'model': ref.state_dict()}, src)
    convert_checkpoint(src, dst, model='vqkd', source='unilm')
    sd = torch.load(dst)['state_dict']
    assert not any(k.startswith(('teacher_model.', 'scaling_layer.')) for k in sd)
    ours = VQKD(arch=SMALL, attn_impl='eager', init_cfg=dict(type='Pretrained', checkpoint=dst))
    ours.init_weights()
    assert set(ours.state_dict()) == set(sd)
    imgs = images()
    ref_ids, ref_rec, zq = ref.codebook_indices_and_features(imgs)
    assert torch.equal(ours.get_token_ids(imgs), ref_ids)
    with torch.no_grad():
        rec = ours.decode(zq, (4, 4))
    assert (rec - ref_rec).abs().max() <= TOL
    # a frozen tokenizer: no trainable parameters, eval mode after .train()
    assert not any(p.requires_grad for p in ours.parameters())
    assert not ours.train().training


def test_default_arch_builds_from_init_cfg_alone(tmp_path):
    """unilm ``vqkd_encoder_base_decoder_3x768x12_clip`` layout converts and loads into ``dict(type='VQKD',
    init_cfg=...)`` with no other argument (strict); ids identical to the unilm-layout model."""
    from beit_mm.registry import MODELS
    arch = dict(encoder=dict(embed_dims=768, num_layers=12, num_heads=12), decoder=dict(embed_dims=768, num_layers=3,
                num_heads=12), img_size=224, patch_size=16, num_codes=8192, code_dims=32, out_dims=512)
    torch.manual_seed(0)
    ref = UnilmVQKDStandIn(arch).eval()
    src, dst = osp.join(tmp_path, 'unilm.pth'), osp.join(tmp_path, 'vqkd.pth')
    torch.save({'model': ref.state_dict()}, src)
    convert_checkpoint(src, dst, model='vqkd', source='unilm')
    ours = MODELS.build(dict(type='VQKD', init_cfg=dict(type='Pretrained', checkpoint=dst)))
    ours.init_weights()
    imgs = images(1, 224)
    assert torch.equal(ours.get_token_ids(imgs), ref.codebook_indices_and_features(imgs)[0])


def test_loader_errors_name_the_fix(tmp_path):
    ref = UnilmVQKDStandIn(SMALL)
    src = osp.join(tmp_path, 'unilm.pth')
    torch.save({'model': ref.state_dict()}, src)
    with pytest.raises(KeyError, match='--model vqkd --source unilm'):
        VQKD(arch=SMALL, init_cfg=dict(type='Pretrained', checkpoint=src)).init_weights()
    sd = convert_vqkd(ref.state_dict(), 'unilm')
    enc_only = osp.join(tmp_path, 'enc.pth')
    torch.save({'state_dict': {k: v for k, v in sd.items() if not k.startswith(('decoder.', 'decode_task'))}},
               enc_only)
    with pytest.raises(KeyError, match='with_decoder=False'):
        VQKD(arch=SMALL, init_cfg=dict(type='Pretrained', checkpoint=enc_only)).init_weights()
    with pytest.raises(ValueError, match='--source unilm'):
        convert_vqkd(ref.state_dict(), 'mmpretrain')


def test_tokenizer_without_decoder_loads_a_full_file(tmp_path):
    """with_decoder=False (the BEiT v2 pretraining configs' tokenizer) loads a file with a decoder, skips its decoder
    weights, builds none, and gives the ids of the unilm-layout model."""
    torch.manual_seed(0)
    ref = UnilmVQKDStandIn(SMALL).eval()
    dst = osp.join(tmp_path, 'vqkd.pth')
    torch.save({'state_dict': convert_vqkd(ref.state_dict(), 'unilm')}, dst)
    model = VQKD(arch=SMALL, with_decoder=False, init_cfg=dict(type='Pretrained', checkpoint=dst))
    model.init_weights()
    assert not hasattr(model, 'decoder') and not hasattr(model, 'decode_task_layer')
    imgs = images(2)
    assert torch.equal(model.get_token_ids(imgs), ref.codebook_indices_and_features(imgs)[0])


# ---------------------------------------------------------------------------------------------------- teachers
def test_clip_teacher_matches_hf(tmp_path):
    """CLIPTeacher loaded from a HF ``CLIPVisionModelWithProjection`` folder == HF's
    ``visual_projection(post_layernorm(last_hidden_state[:, 1:]))`` (unilm's all-token projection) on CLIP-normalized
    input, random weights, small config; <= 1e-4. Also from a state-dict file in OpenAI's ``visual.*`` names."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection
    cfg = CLIPVisionConfig(hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8, projection_dim=24, hidden_act='quick_gelu')
    torch.manual_seed(0)
    hf = CLIPVisionModelWithProjection(cfg).eval()
    randomize_(hf, std=0.1)
    hf.save_pretrained(osp.join(tmp_path, 'hf'))
    teacher = CLIPTeacher(**CLIP_SMALL, checkpoint=osp.join(tmp_path, 'hf'))
    teacher.init_weights()
    imgs = images()
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)
    with torch.no_grad():
        out = hf.vision_model(pixel_values=(imgs / 255 - mean) / std)
        ref = hf.visual_projection(hf.vision_model.post_layernorm(out.last_hidden_state[:, 1:]))
    feats = teacher(imgs)
    assert feats.shape == (4, 16, 24)
    assert (feats - ref).abs().max() <= TOL
    # OpenAI layout (visual.* plus text-tower keys that are ignored)
    sd = convert_hf_clip(hf.state_dict())
    sd['transformer.resblocks.0.ln_1.weight'] = torch.ones(3)
    path = osp.join(tmp_path, 'openai.pt')
    torch.save(sd, path)
    t2 = CLIPTeacher(**CLIP_SMALL, checkpoint=path)
    t2.init_weights()
    assert (t2(imgs) - ref).abs().max() <= TOL
    assert not any(p.requires_grad for p in t2.parameters()) and not t2.train().training
    with pytest.raises(ValueError, match='another CLIP architecture'):
        CLIPTeacher(**dict(CLIP_SMALL, output_dim=12), checkpoint=path).init_weights()


def test_dino_teacher_matches_timm_vit(tmp_path):
    """A DINO-layout ViT (timm VisionTransformer: DINO's names, full qkv bias, final norm, eps 1e-6) converted by
    ``tools/convert_checkpoint.py --model dino`` into BackboneTeacher(BEiT) == the ViT's normed patch tokens on
    ImageNet-normalized input (unilm ScalingLayerForIM), random weights incl. the key bias; <= 1e-4."""
    from functools import partial

    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    vit = VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, qkv_bias=True,
                            num_classes=0, norm_layer=partial(nn.LayerNorm, eps=1e-6)).eval()
    randomize_(vit, std=0.1)
    src, dst = osp.join(tmp_path, 'dino.pth'), osp.join(tmp_path, 'dino_beit.pth')
    torch.save(vit.state_dict(), src)
    convert_checkpoint(src, dst, model='dino', source='official')
    teacher = BackboneTeacher(backbone=dict(
        type='BEiT', arch=dict(embed_dims=64, num_layers=2, num_heads=4, mlp_ratio=4.0), img_size=32, patch_size=8,
        use_abs_pos_emb=True, use_rel_pos_bias=False, layer_scale_init_value=0.0, drop_path_rate=0.0,
        final_norm=True, attn_impl='eager', init_cfg=dict(type='Pretrained', checkpoint=dst)))
    teacher.init_weights()
    imgs = images()
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        ref = vit.forward_features((imgs / 255 - mean) / std)[:, 1:]
    assert (teacher(imgs) - ref).abs().max() <= TOL
    assert convert_dino_vit(vit.state_dict()).keys().isdisjoint({'blocks.0.attn.qkv.bias'})


# --------------------------------------------------------------------------------------- training, evaluation
def test_mmengine_train_step_and_heldout_statistics():
    """VQKD trains as an MMEngine model (k-means init, the codebook moves) and evaluate_vqkd reports usage, perplexity,
    dead codes and teacher_cosine = 1 - unilm's cosine loss of the hard codes."""
    from mmengine.optim import OptimWrapper
    model = small_vqkd()
    model.train()
    wrapper = OptimWrapper(torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3))
    batch = dict(inputs=[img.to(torch.uint8) for img in images(4)])  # BGR uint8 as PackInputs gives
    log = model.train_step(batch, wrapper)
    assert {'loss', 'loss_quant', 'loss_rec', 'codebook_usage'} <= set(log)
    assert model.quantize.embedding.initted.item() == 1.0
    held = images(6, seed=5) / 255
    stats = evaluate_vqkd(model, held)
    ids = model.get_token_ids(held * 255)
    # usage = fraction of the codebook used; perplexity = exp(entropy of the code frequencies), counted here in numpy
    _, counts = np.unique(ids.numpy(), return_counts=True)
    freq = counts / counts.sum()
    assert stats['usage'] == pytest.approx(len(counts) / SMALL['num_codes'], rel=1e-12)
    assert stats['perplexity'] == pytest.approx(float(np.exp(-(freq * np.log(freq)).sum())), rel=1e-9)
    assert stats['dead_codes'] == SMALL['num_codes'] - len(counts)
    # teacher cosine: the mean cosine similarity of the decoded hard codes with the teacher's features
    with torch.no_grad():
        rec = model.decode(model.quantize.embedding.weight[ids], (4, 4))
        cos = F.cosine_similarity(rec.double(), model.teacher_features(held * 255).double(), dim=-1).mean()
    assert abs(stats['teacher_cosine'] - cos.item()) < 1e-5
    assert model.training  # restored


def test_teacher_grid_mismatch_is_named():
    model = VQKD(arch=dict(SMALL, out_dims=24), teacher=dict(type='CLIPTeacher', **dict(CLIP_SMALL, patch_size=4)))
    with pytest.raises(ValueError, match='patch stride'):
        model.loss(images())
