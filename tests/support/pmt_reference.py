"""Reference side of tests/models/test_pmt_reference.py: a random tiny PMT built by tue-mps/pmt@54d73c9 on a random
transformers DINOv3ViTModel, run in a subprocess whose ``sys.path`` holds transformers >= 4.56 and the extracted
``image/`` folder of tue-mps/pmt; imports nothing of beit_mm.

    python pmt_reference.py OUT

Writes OUT/encoder.pt (the DINOv3ViTModel state dict), OUT/decoder.pt (the network's non-encoder weights under
``network.``, as its Lightning checkpoints) and OUT/ref.pt (the input in [0, 1] and, per mode and mask probability,
the class and mask logits of every prediction)."""
import os
import sys

import torch

DIMS, DEPTH, HEADS, REGS, PATCH, SIZE = 64, 4, 4, 4, 16, 64
FEATURES, QUERIES, CLASSES, BLOCKS = [0, 1, 3], 10, 7, 6


def randomize(model: torch.nn.Module, seed: int) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'mask_token' not in name:
                p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 or 'token' in name else 0.1))
        for name, b in model.named_buffers():
            if name.endswith('running_mean'):
                b.copy_(torch.randn_like(b) * 0.1)
            elif name.endswith('running_var'):
                b.copy_(torch.rand_like(b) + 0.5)


def build():
    import transformers
    from models.pmt import PMT
    from models.vit import ViT
    cfg = transformers.DINOv3ViTConfig(hidden_size=DIMS, num_hidden_layers=DEPTH, num_attention_heads=HEADS,
                                       intermediate_size=4 * DIMS, patch_size=PATCH, image_size=SIZE,
                                       num_register_tokens=REGS, layer_norm_eps=1e-5, layerscale_value=1e-5)
    hf = transformers.DINOv3ViTModel(cfg)
    randomize(hf, 1)
    encoder_sd = {k: v.clone() for k, v in hf.state_dict().items()}
    vit = ViT.__new__(ViT)  # ViT.__init__ downloads the weights: set up what it sets, on the random model
    torch.nn.Module.__init__(vit)
    vit.image_size, vit.is_dinov3, vit.is_frozen = (SIZE, SIZE), True, True
    vit.backbone = vit.transformers_to_timm(hf, (SIZE, SIZE))
    vit.register_buffer('pixel_mean', torch.tensor([0.485, 0.456, 0.406]).reshape(1, -1, 1, 1))
    vit.register_buffer('pixel_std', torch.tensor([0.229, 0.224, 0.225]).reshape(1, -1, 1, 1))
    vit.freeze_encoder()
    model = PMT(vit, num_classes=CLASSES, num_q=QUERIES, num_blocks=BLOCKS, interaction_indices=FEATURES,
                hidden_dim=DIMS)
    randomize(model.decoder, 2)
    randomize(model.bn, 3)
    return model, encoder_sd, transformers.__version__


def main(out: str) -> None:
    model, encoder_sd, version = build()
    decoder = {f'network.{k}': v.clone() for k, v in model.state_dict().items() if not k.startswith('encoder.')}
    torch.manual_seed(4)
    x = torch.rand(2, 3, SIZE, SIZE)
    logits = {}
    for mode, prob in (('train', 1.0), ('train', 0.5), ('train', 0.0), ('eval', 1.0), ('eval', 0.0)):
        model.load_state_dict({k[len('network.'):]: v for k, v in decoder.items()}, strict=False)  # BN statistics
        model.train(mode == 'train')
        model.encoder.backbone.eval()  # frozen: Lightning keeps the mode the encoder was given (vit.py:82)
        model.decoder.attn_mask_probs.fill_(prob)
        torch.manual_seed(5)
        with torch.no_grad():
            masks, classes = model(x)
        logits[f'{mode}_p{prob:g}'] = (classes, masks)
    torch.save(encoder_sd, os.path.join(out, 'encoder.pt'))
    torch.save(decoder, os.path.join(out, 'decoder.pt'))
    torch.save({'x': x, 'logits': logits, 'version': version}, os.path.join(out, 'ref.pt'))


if __name__ == '__main__':
    main(*sys.argv[1:])
