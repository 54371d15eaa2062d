"""Reference side of test_convert_dinov3.py: random tiny transformers ``DINOv3ViTModel``s with settings other than
beit_mm's defaults, run in a subprocess whose ``sys.path`` starts with transformers 4.57.6; imports nothing of beit_mm.

    python dinov3_hf_settings_reference.py OUT NAME='{"rope_theta": 1000, ...}' ...

For each NAME writes OUT/NAME/ (``save_pretrained``: config.json, model.safetensors) and OUT/NAME/ref.pt (the input
and the final-normed tokens, eval mode) and OUT/version.txt."""
import json
import os
import sys

import torch

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, patch_size=16,
            image_size=64, layerscale_value=1e-5)


def main(out: str, *cases: str) -> None:
    import transformers
    for case in cases:
        name, settings = case.split('=', 1)
        config = transformers.DINOv3ViTConfig(**TINY, **json.loads(settings))
        model = transformers.DINOv3ViTModel(config).eval()
        torch.manual_seed(1)
        with torch.no_grad():
            for key, p in model.named_parameters():
                if 'mask_token' not in key:
                    p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 or 'token' in key else 0.1))
        torch.manual_seed(2)
        x = torch.randn(2, 3, 48, 80)
        with torch.no_grad():
            final = model(pixel_values=x).last_hidden_state
        model.save_pretrained(os.path.join(out, name))
        torch.save({'x': x, 'final': final}, os.path.join(out, name, 'ref.pt'))
    with open(os.path.join(out, 'version.txt'), 'w') as f:
        f.write(transformers.__version__)


if __name__ == '__main__':
    main(*sys.argv[1:])
