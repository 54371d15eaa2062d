"""Reference side of test_dinov3_reference.py: a random tiny DINOv3 built by a reference implementation, run in a
subprocess whose ``sys.path`` starts with that reference; imports nothing of beit_mm.

    python dinov3_reference.py official OUT   # facebookresearch/dinov3 DinoVisionTransformer (on PYTHONPATH)
    python dinov3_reference.py hf OUT         # transformers DINOv3ViTModel (4.57.6)
    python dinov3_reference.py hf-eomt OUT    # transformers EomtDinov3ForUniversalSegmentation (>= 5.2)

Writes OUT/weights.pt (HF: and OUT/config.json) and OUT/ref.pt (inputs at 64 x 64 and 48 x 80, the tokens after
every block and the final norm, or EoMT's logits); every weight random. ``swiglu`` as a third argument builds the
SwiGLU MLP."""
import os
import sys

import torch

DIMS, DEPTH, HEADS, REGS, PATCH = 64, 3, 4, 4, 16
SIZES = ((64, 64), (48, 80))


def randomize(model: torch.nn.Module) -> None:
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'mask_token' in name:
                continue
            p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 or 'token' in name else 0.1))


def inputs() -> list:
    torch.manual_seed(2)
    return [torch.randn(2, 3, *size) for size in SIZES]


def official(out: str, ffn: str = 'mlp') -> dict:
    import subprocess
    from dinov3.models.vision_transformer import DinoVisionTransformer
    model = DinoVisionTransformer(
        img_size=64, patch_size=PATCH, embed_dim=DIMS, depth=DEPTH, num_heads=HEADS, ffn_ratio=4.0,
        pos_embed_rope_base=100, pos_embed_rope_normalize_coords='separate', pos_embed_rope_rescale_coords=2,
        pos_embed_rope_dtype='fp32', qkv_bias=True, layerscale_init=1e-5, norm_layer='layernormbf16',
        ffn_layer=ffn, n_storage_tokens=REGS, mask_k_bias=True)  # dinov3/hub/backbones.py dinov3_vitl16's settings
    model.init_weights()
    randomize(model)
    model.eval()
    results = []
    for x in inputs():
        with torch.no_grad():
            blocks = model._get_intermediate_layers_not_chunked(x, n=list(range(DEPTH)))
            normed = model.forward_features(x)
        final = torch.cat([normed['x_norm_clstoken'][:, None], normed['x_storage_tokens'],
                           normed['x_norm_patchtokens']], dim=1)
        results.append({'x': x, 'blocks': blocks, 'final': final})
    root = os.path.dirname(os.path.dirname(sys.modules['dinov3'].__file__))
    commit = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=root, capture_output=True, text=True).stdout.strip()
    return {'state_dict': model.state_dict(), 'results': results, 'version': commit or 'unknown'}


def hf_config(cls, ffn: str, **extra):
    hidden = int(DIMS * 4.0)
    if ffn == 'swiglu':  # dinov3 SwiGLUFFN: int(hidden * 2 / 3) rounded up to 8
        d = int(hidden * 2 / 3)
        hidden = d + (-d % 8)
    return cls(hidden_size=DIMS, num_hidden_layers=DEPTH, num_attention_heads=HEADS, intermediate_size=hidden,
               patch_size=PATCH, image_size=64, num_register_tokens=REGS, layer_norm_eps=1e-5, layerscale_value=1e-5,
               use_gated_mlp=ffn == 'swiglu', hidden_act='silu' if ffn == 'swiglu' else 'gelu', **extra)


def hf(out: str, ffn: str = 'mlp') -> dict:
    import transformers
    model = transformers.DINOv3ViTModel(hf_config(transformers.DINOv3ViTConfig, ffn)).eval()
    model.config.to_json_file(os.path.join(out, 'config.json'))  # the converter reads it beside weights.pt
    randomize(model)
    results = []
    for x in inputs():
        with torch.no_grad():
            o = model(pixel_values=x, output_hidden_states=True)
        hidden = list(o.hidden_states)
        results.append({'x': x, 'blocks': hidden[-DEPTH:], 'final': o.last_hidden_state,
                        'num_hidden_states': len(hidden)})
    return {'state_dict': model.state_dict(), 'results': results, 'version': transformers.__version__}


def hf_eomt(out: str, ffn: str = 'mlp') -> dict:
    import transformers
    # pos_embed_rescale=None: no random RoPE rescale in the train-mode comparison
    cfg = hf_config(transformers.EomtDinov3Config, ffn, num_blocks=2, num_queries=10, num_labels=7,
                    num_upscale_blocks=2, pos_embed_rescale=None)
    model = transformers.EomtDinov3ForUniversalSegmentation(cfg)
    model.config.to_json_file(os.path.join(out, 'config.json'))
    randomize(model)
    x = inputs()[0]
    logits = {}
    for mode, prob in (('eval', 1.0), ('eval', 0.0), ('train', 1.0)):
        model.train(mode == 'train')
        model.attn_mask_probs.fill_(prob)
        torch.manual_seed(3)
        with torch.no_grad():
            o = model(pixel_values=x)
        logits[f'{mode}_p{prob:g}'] = (o.class_queries_logits, o.masks_queries_logits)
    return {'state_dict': model.state_dict(), 'results': [{'x': x, 'logits': logits}],
            'version': transformers.__version__}


def main(kind: str, out: str, ffn: str = 'mlp') -> None:
    ref = {'official': official, 'hf': hf, 'hf-eomt': hf_eomt}[kind](out, ffn)
    torch.save(ref.pop('state_dict'), os.path.join(out, 'weights.pt'))
    torch.save(ref, os.path.join(out, 'ref.pt'))


if __name__ == '__main__':
    main(*sys.argv[1:])
