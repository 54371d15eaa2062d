"""BEiT v2 checkpoints load strictly into beit_mm's ``BEiT`` and give their reference's outputs (fp32, max abs diff
<= 1e-4 unless stated):
- unilm ``beit2`` pretrained files: the rule from ``beit2/modeling_finetune.py`` (``Attention``, ``Block``) and
  ``beit2/modeling_pretrain.py`` ``forward_features``; ``run_class_finetuning.py`` lines 372-379 share the table;
- unilm ``beit2`` fine-tuned files: the same with ``VisionTransformer.forward_features`` mean pooling;
- timm 1.0 ``beitv2_base_patch16_224`` / ``beitv2_large_patch16_224`` (random weights);
- mmpretrain 1.2.0 ``BEiTViT`` (fine-tuning) and ``BEiTPretrainViT`` + ``BEiTV2Neck`` (pretraining)."""

import pytest
import torch
import torch.nn.functional as F

from beit_mm.apis.convert import convert_checkpoint
from beit_mm.converters.beit import convert_beit
from beit_mm.fileio import load_state_dict_file
from beit_mm.models.backbones import BEiT
from beit_mm.models.necks import MeanPoolNeck

from ..conftest import randomize_
from ..models.test_beit2_mim import ARCH, DIM, EARLY, HEADS, make_batch, mmpretrain_beitv2, v2_backbone

GRID = (4, 4)


# ------------------------------------------------------------------------------------------- unilm beit2 rule
def unilm_relative_position_index(wh: int, ww: int) -> torch.Tensor:
    """unilm beit2/modeling_finetune.py Attention.__init__ (and RelativePositionBias): (1 + wh*ww, 1 + wh*ww)."""
    coords = torch.stack(torch.meshgrid([torch.arange(wh), torch.arange(ww)], indexing='ij')).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    num_relative_distance = (2 * wh - 1) * (2 * ww - 1) + 3
    index = torch.zeros((wh * ww + 1, ) * 2, dtype=rel.dtype)
    index[1:, 1:] = rel.sum(-1)
    index[0, 0:] = num_relative_distance - 3
    index[0:, 0] = num_relative_distance - 2
    index[0, 0] = num_relative_distance - 1
    return index


def unilm_bias(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    n = index.shape[0]
    return table[index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()


def unilm_block(sd: dict, p: str, x: torch.Tensor, heads: int, rel_pos_bias=None) -> torch.Tensor:
    """unilm modeling_finetune.py Block.forward (gamma_1/gamma_2) with Attention.forward (q_bias, zero k bias, v_bias;
    own table when the block has one, plus the shared ``rel_pos_bias``) and Mlp (fc1, GELU, fc2); LayerNorm eps 1e-6."""
    b, n, c = x.shape
    h = F.layer_norm(x, (c, ), sd[p + 'norm1.weight'], sd[p + 'norm1.bias'], 1e-6)
    qkv_bias = torch.cat((sd[p + 'attn.q_bias'], torch.zeros_like(sd[p + 'attn.v_bias']), sd[p + 'attn.v_bias']))
    qkv = F.linear(h, sd[p + 'attn.qkv.weight'], qkv_bias).reshape(b, n, 3, heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    attn = (q * (c // heads)**-0.5) @ k.transpose(-2, -1)
    if p + 'attn.relative_position_bias_table' in sd:
        attn = attn + unilm_bias(sd[p + 'attn.relative_position_bias_table'],
                                 sd[p + 'attn.relative_position_index']).unsqueeze(0)
    if rel_pos_bias is not None:
        attn = attn + rel_pos_bias
    y = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1)
    y = F.linear(y, sd[p + 'attn.proj.weight'], sd[p + 'attn.proj.bias'])
    x = x + sd[p + 'gamma_1'] * y
    h = F.layer_norm(x, (c, ), sd[p + 'norm2.weight'], sd[p + 'norm2.bias'], 1e-6)
    h = F.linear(F.gelu(F.linear(h, sd[p + 'mlp.fc1.weight'], sd[p + 'mlp.fc1.bias'])), sd[p + 'mlp.fc2.weight'],
                 sd[p + 'mlp.fc2.bias'])
    return x + sd[p + 'gamma_2'] * h


def unilm_embed(sd: dict, x: torch.Tensor, patch: int, mask=None) -> torch.Tensor:
    t = F.conv2d(x, sd['patch_embed.proj.weight'], sd['patch_embed.proj.bias'], stride=patch)
    t = t.flatten(2).transpose(1, 2)
    if mask is not None:  # modeling_pretrain.py forward_features lines 311-316
        w = mask.flatten(1).unsqueeze(-1).type_as(t)
        t = t * (1 - w) + sd['mask_token'].expand_as(t) * w
    return torch.cat([sd['cls_token'].expand(t.shape[0], -1, -1), t], 1)


def unilm_pretrained_forward(sd: dict, x, depth: int, heads: int, patch: int, mask=None, early=None):
    """modeling_pretrain.py VisionTransformerForMaskedImageModelingCLS.forward_features (shared bias, final norm):
    (norm(x), norm(x_cls_pt)), cls tokens kept; with ``early=None`` only norm(x)."""
    t = unilm_embed(sd, x, patch, mask)
    shared = unilm_bias(sd['rel_pos_bias.relative_position_bias_table'], sd['rel_pos_bias.relative_position_index'])
    for i in range(depth):
        t = unilm_block(sd, f'blocks.{i}.', t, heads, shared)
        if early is not None and i + 1 == early:
            early_states = t[:, 1:]
    norm = lambda z: F.layer_norm(z, (z.shape[-1], ), sd['norm.weight'], sd['norm.bias'], 1e-6)  # noqa: E731
    if early is None:
        return norm(t)
    x_cls_pt = torch.cat([t[:, [0]], early_states], 1)
    i = 0
    while f'cls_pt_layers.{i}.norm1.weight' in sd:
        x_cls_pt = unilm_block(sd, f'cls_pt_layers.{i}.', x_cls_pt, heads, shared)
        i += 1
    return norm(t), norm(x_cls_pt)


def unilm_finetuned_logits(sd: dict, x, depth: int, heads: int, patch: int) -> torch.Tensor:
    """modeling_finetune.py VisionTransformer.forward with use_mean_pooling: head(fc_norm(mean of patch tokens))."""
    t = unilm_embed(sd, x, patch)
    for i in range(depth):
        t = unilm_block(sd, f'blocks.{i}.', t, heads)
    pooled = F.layer_norm(t[:, 1:].mean(1), (t.shape[-1], ), sd['fc_norm.weight'], sd['fc_norm.bias'], 1e-6)
    return F.linear(pooled, sd['head.weight'], sd['head.bias'])


def unilm_beit2_pretrained_state_dict(seed=0, vocab=16) -> dict:
    """Keys, shapes and relative position index of unilm's beitv2_*_pt1k.pth (a toy BEiT-v2 with early_layers 3):
    beit_mm's v2 MIM backbone keeps unilm's names; random values."""
    sd = randomize_(v2_backbone(), seed=seed, std=0.2).state_dict()
    sd['rel_pos_bias.relative_position_index'] = unilm_relative_position_index(*GRID)
    g = torch.Generator().manual_seed(seed + 1)
    sd['lm_head.weight'] = 0.2 * torch.randn(vocab, DIM, generator=g)
    sd['lm_head.bias'] = torch.zeros(vocab)
    return sd


def convert_cli(tmp_path, sd: dict, model: str = 'beit', source: str = 'unilm', **options) -> dict:
    """``beit_mm.apis.convert.convert_checkpoint`` (what tools/convert_checkpoint.py calls) on ``sd`` saved as
    ``{'model': sd}``; the converted state dict."""
    torch.save({'model': sd}, tmp_path / 'src.pth')
    convert_checkpoint(str(tmp_path / 'src.pth'), str(tmp_path / 'dst.pth'), model=model, source=source, **options)
    return load_state_dict_file(str(tmp_path / 'dst.pth'))


def test_unilm_beit2_pretrained_converts_with_the_plain_command(tmp_path):
    """``--model beit --source unilm`` (no extra flag): cls_pt_layers, lm_head, mask_token dropped, the shared table
    copied into every block; loads strictly into BEiT(use_rel_pos_bias=True, final_norm=True) and gives unilm's
    final-normed tokens of the unmasked image."""
    src = unilm_beit2_pretrained_state_dict()
    out = convert_cli(tmp_path, src)
    assert not [k for k in out if k.startswith(('cls_pt_layers.', 'lm_head.', 'mask_token', 'rel_pos_bias.'))]
    model = BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=True, final_norm=True,
                 drop_path_rate=0.0).eval()
    model.load_state_dict(out, strict=True)
    images = make_batch()[0]
    with torch.no_grad():
        ours = model.forward_tokens(images)[0][-1]
        ref = unilm_pretrained_forward(src, images, len(model.blocks), HEADS, 8)
    assert (ours - ref).abs().max() <= 1e-4


def test_unilm_beit2_pretrained_keeps_its_pretraining_forward(tmp_path):
    """``--keep-mim-head --keep-shared-rel-pos-bias``: the file loads strictly into the v2 MIM backbone (+ lm_head)
    and forward_masked gives unilm's two outputs (VisionTransformerForMaskedImageModelingCLS)."""
    src = unilm_beit2_pretrained_state_dict()
    out = convert_cli(tmp_path, src, keep_mim_head=True, keep_shared_rel_pos_bias=True)
    lm_head = {k: out.pop(k) for k in ('lm_head.weight', 'lm_head.bias')}
    assert torch.equal(lm_head['lm_head.weight'], src['lm_head.weight'])
    model = v2_backbone().eval()
    model.load_state_dict(out, strict=True)
    images, mask, _ = make_batch()
    with torch.no_grad():
        ours = model.forward_masked(images, mask)
        ref = unilm_pretrained_forward(src, images, len(model.blocks), HEADS, 8, mask=mask, early=EARLY)
    for a, b in zip(ours, ref):
        assert (a - b[:, 1:]).abs().max() <= 1e-4


def test_unilm_beit2_finetuned_file(tmp_path):
    """A file with unilm's fine-tuned names (per-block tables and index buffers, fc_norm, head, no norm) loads strictly
    with --keep-head and gives unilm's logits through BEiT + MeanPoolNeck + the Linear head."""
    m = randomize_(BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=True, final_norm=False), std=0.2)
    src = m.state_dict()
    for i in range(len(m.blocks)):
        src[f'blocks.{i}.attn.relative_position_index'] = unilm_relative_position_index(*GRID)
    g = torch.Generator().manual_seed(7)
    src.update({'fc_norm.weight': 1 + 0.2 * torch.randn(DIM, generator=g), 'fc_norm.bias': torch.randn(DIM, generator=g),
                'head.weight': 0.2 * torch.randn(10, DIM, generator=g), 'head.bias': torch.randn(10, generator=g)})
    out = convert_cli(tmp_path, src, keep_head=True)
    head = {k: out.pop(k) for k in ('head.weight', 'head.bias')}
    fc_norm = {k[len('fc_norm.'):]: out.pop(k) for k in ('fc_norm.weight', 'fc_norm.bias')}
    model = BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=True, final_norm=False,
                 drop_path_rate=0.0).eval()
    model.load_state_dict(out, strict=True)
    neck = MeanPoolNeck(DIM).eval()
    neck.fc_norm.load_state_dict(fc_norm, strict=True)
    images = make_batch()[0]
    with torch.no_grad():
        ours = F.linear(neck(model(images))[0], head['head.weight'], head['head.bias'])
        ref = unilm_finetuned_logits(src, images, len(model.blocks), HEADS, 8)
    assert (ours - ref).abs().max() <= 1e-4


# ------------------------------------------------------------------------------------------------------- timm
@pytest.mark.parametrize('name', ['beitv2_base_patch16_224', 'beitv2_large_patch16_224'])
def test_timm_beitv2(name):
    """timm 1.0 beitv2_* (random weights; std 0.02 so 12/24 blocks stay in range) -> --source timm --keep-head ->
    loads strictly into BEiT + fc_norm + head; base: the same logits as timm's forward."""
    import timm
    torch.manual_seed(0)
    ref = randomize_(timm.create_model(name, pretrained=False), std=0.02).eval()
    out = convert_beit(ref.state_dict(), 'timm', keep_head=True)
    head = {k[len('head.'):]: out.pop(k) for k in ('head.weight', 'head.bias')}
    fc_norm = {k[len('fc_norm.'):]: out.pop(k) for k in ('fc_norm.weight', 'fc_norm.bias')}
    arch = 'large' if 'large' in name else 'base'
    model = BEiT(arch=arch, img_size=224, use_rel_pos_bias=True, final_norm=False, drop_path_rate=0.0).eval()
    model.load_state_dict(out, strict=True)
    if arch == 'large':  # strict loading only: a 24-block forward at 224 is too slow for this CPU test
        return
    neck = MeanPoolNeck(768).eval()
    neck.fc_norm.load_state_dict(fc_norm, strict=True)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = ref(x)
        got = F.linear(neck(model(x))[0], head['weight'], head['bias'])
    assert want.abs().max() > 1e-2 and (want - got).abs().max() <= 1e-4


# ------------------------------------------------------------------------------------------------- mmpretrain
def test_mmpretrain_beitv2_finetuning_backbone():
    """mmpretrain 1.2.0 configs/beitv2/benchmarks/beit-base-p16_8xb128-coslr-100e_in1k.py backbone (BEiTViT,
    per-block tables, out_type avg_featmap = ln2(mean of patch tokens)) at toy size: same pooled features."""
    from mmpretrain.models.backbones import BEiTViT
    ref = randomize_(BEiTViT(arch=dict(embed_dims=DIM, num_layers=4, num_heads=HEADS, feedforward_channels=2 * DIM),
                             img_size=32, patch_size=8, out_type='avg_featmap', use_abs_pos_emb=False,
                             use_rel_pos_bias=True, use_shared_rel_pos_bias=False, layer_scale_init_value=0.1),
                     std=0.2)
    ref.eval()  # mmpretrain's BEiTViT.train() returns None, so no chaining
    sd = {f'backbone.{k}': v for k, v in ref.state_dict().items()}
    sd['head.fc.weight'] = torch.zeros(10, DIM)  # an ImageClassifier's head: not the backbone's
    out = convert_beit(sd, 'mmpretrain', keep_head=True)
    fc_norm = {k[len('fc_norm.'):]: out.pop(k) for k in ('fc_norm.weight', 'fc_norm.bias')}
    model = BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=True, final_norm=False,
                 drop_path_rate=0.0).eval()
    model.load_state_dict(out, strict=True)
    neck = MeanPoolNeck(DIM).eval()
    neck.fc_norm.load_state_dict(fc_norm, strict=True)
    images = make_batch()[0]
    with torch.no_grad():
        assert (ref(images)[0] - neck(model(images))[0]).abs().max() <= 1e-4


def test_mmpretrain_beitv2_pretraining_checkpoint():
    """A whole mmpretrain BEiT v2 pretraining model (backbone, BEiTV2Neck, BEiTV2Head, VQKD): --source mmpretrain keeps
    the backbone with neck.norm as its final norm, drops the neck's blocks, head and tokenizer; the result loads
    strictly into BEiT(use_rel_pos_bias=True, final_norm=True) and gives mmpretrain's final-normed tokens."""
    ref = randomize_(mmpretrain_beitv2(), seed=1)
    ref.eval()
    out = convert_beit(ref.state_dict(), 'mmpretrain')
    assert not [k for k in out if k.startswith(('cls_pt_layers.', 'lm_head.', 'mask_token', 'target_generator'))]
    model = BEiT(arch=ARCH, img_size=32, patch_size=8, use_rel_pos_bias=True, final_norm=True,
                 drop_path_rate=0.0).eval()
    model.load_state_dict(out, strict=True)
    images, mask, _ = make_batch()
    no_mask = torch.zeros_like(mask)
    with torch.no_grad():
        early, last = ref.backbone(images, no_mask)
        want = ref.neck.norm(last)
        got = model.forward_tokens(images)[0][-1]
    assert (want - got).abs().max() <= 1e-4
