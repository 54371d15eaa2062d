"""HF side of test_eomt_hf.py: transformers 4.57.6 ``EomtForUniversalSegmentation`` in a subprocess led by the
reference transformers; imports nothing of beit_mm.

    python eomt_hf_reference.py make OUT      # a random tiny EoMT: OUT/hf (save_pretrained), OUT/ref.pt (inputs, logits)
    python eomt_hf_reference.py run FOLDER OUT_FILE   # from_pretrained(FOLDER) strictly, logits on OUT/ref.pt's inputs

Logits: the last prediction's class (B, K, C + 1) and mask (B, K, H/4, W/4) logits, eval with ``attn_mask_probs``
all 1 and all 0, train with all 1."""
import os
import sys

import torch
import transformers

#: The tiny model: 4 layers, the last 2 with 10 queries; 4 registers; 7 classes; 64 px at patch 16 (2 upscale blocks).
CONFIG = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, mlp_ratio=4, image_size=64, patch_size=16,
              num_blocks=2, num_queries=10, num_register_tokens=4, num_labels=7, num_upscale_blocks=2)


def logits(model, x: torch.Tensor) -> dict:
    out = {}
    for mode, prob in (('eval', 1.0), ('eval', 0.0), ('train', 1.0)):
        model.train(mode == 'train')
        model.attn_mask_probs.fill_(prob)
        with torch.no_grad():
            o = model(pixel_values=x)
        out[f'{mode}_p{prob:g}'] = (o.class_queries_logits, o.masks_queries_logits)
    return out


def make(out_dir: str) -> None:
    torch.manual_seed(0)
    model = transformers.EomtForUniversalSegmentation(transformers.EomtConfig(**CONFIG))
    with torch.no_grad():  # layer scales, biases (the key bias included) and registers matter
        for name, p in model.named_parameters():
            if 'lambda1' in name or name.endswith('bias') or 'register_tokens' in name:
                p.copy_(torch.randn_like(p) * 0.5)
    model.save_pretrained(os.path.join(out_dir, 'hf'))
    x = torch.randn(2, 3, 64, 64)
    torch.save({'x': x, 'logits': logits(model, x), 'version': transformers.__version__},
               os.path.join(out_dir, 'ref.pt'))


def run(folder: str, out_file: str) -> None:
    model, info = transformers.EomtForUniversalSegmentation.from_pretrained(folder, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise SystemExit(f'{folder} does not load strictly: {bad}')
    x = torch.load(os.path.join(os.path.dirname(out_file), 'ref.pt'))['x']
    torch.save(logits(model, x), out_file)


if __name__ == '__main__':
    {'make': make, 'run': run}[sys.argv[1]](*sys.argv[2:])
