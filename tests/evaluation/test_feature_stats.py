"""beit_mm.evaluation.feature_stats against explicit NumPy loops (reference written here: the pairwise cosine of every
distinct token pair of each image, the root mean square of each block's tokens from a forward pass with hooks) and
against weights set by hand (layer scales, bias tables)."""
import numpy as np
import torch

from beit_mm.evaluation.feature_stats import feature_statistics, token_cosine
from beit_mm.models.backbones import BEiT


def test_token_cosine_is_the_mean_over_distinct_pairs():
    torch.manual_seed(0)
    features = torch.randn(3, 5, 2, 3) + 0.7  # (N, C, h, w): 6 tokens per image, partly aligned
    z = features.flatten(2).transpose(1, 2).numpy().astype(np.float64)
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    ref = np.mean([np.mean([z[n, i] @ z[n, j] for i in range(6) for j in range(6) if i != j]) for n in range(3)])
    assert abs(token_cosine(features) - ref) < 1e-10
    assert abs(token_cosine(torch.ones(2, 4, 3, 3)) - 1) < 1e-10  # every token alike


def test_feature_statistics_per_block():
    torch.manual_seed(0)
    model = BEiT(arch=dict(embed_dims=16, num_layers=3, num_heads=2, mlp_ratio=2.0), img_size=32, patch_size=8,
                 layer_scale_init_value=0.1)
    model.init_weights()
    with torch.no_grad():
        model.blocks[1].gamma_1.fill_(-0.5)  # mean |gamma| reads the magnitude
        model.blocks[1].gamma_2.fill_(20.0)  # block 1's output differs from block 0's
        model.blocks[2].attn.relative_position_bias_table.normal_(0, 3.0)
    model.eval()
    images = torch.rand(2, 3, 32, 32)
    outputs = []
    hooks = [b.register_forward_hook(lambda m, i, o: outputs.append(o[:, 1:].double())) for b in model.blocks]
    with torch.no_grad():
        model.forward_tokens(images, out_indices=[2])
    for h in hooks:
        h.remove()
    stats = feature_statistics(model, images)
    assert np.allclose(stats['rms'], [float(o.pow(2).mean().sqrt()) for o in outputs], rtol=1e-5)
    assert abs(stats['rms'][1] - stats['rms'][0]) > 1e-3  # blocks differ, so the order is checked
    assert stats['gamma_1'][1] == 0.5 and abs(stats['gamma_1'][0] - 0.1) < 1e-7 and abs(stats['gamma_2'][2] - 0.1) < 1e-7
    assert stats['rel_pos_bias_std'][:2] == [0.0, 0.0] and 2.5 < stats['rel_pos_bias_std'][2] < 3.5
    assert len(stats['token_cosine']) == 3 and all(-1 <= c <= 1 for c in stats['token_cosine'])
