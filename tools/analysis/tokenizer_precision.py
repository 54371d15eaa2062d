"""How many VQ-KD token ids change when the quantizer runs under the step's autocast (unilm's rule) instead of fp32
(beit_mm's), on images of the study pool and on random images.

    python tools/make_demo_data.py --dataset shapes --root data/shapes_precision --num-train 300 --num-val 0 \
        --seed 1 --no-annotations
    python tools/analysis/tokenizer_precision.py --folder data/shapes_precision/images/training

unilm (``beit2/modeling_vqkd.py`` lines 152-164, called under ``torch.cuda.amp.autocast()`` by
``engine_for_pretraining.py`` lines 54-56) runs the encoder and the quantizer's distance matmul under the step's fp16
autocast and only ``encode_task_layer`` in fp32. beit_mm's ``VQKD`` autocasts the encoder only. Paths compared, all
with the same weights:

- ``fp32``: everything fp32 (the reference);
- ``beit_mm``: encoder under autocast, task layer and quantizer fp32 (``VQKD.get_token_ids``);
- ``unilm``: encoder and quantizer under autocast, task layer fp32.

The tokenizer: with no trained VQ-KD on disk, the study's tokenizer arch (``configs/studies/vqkd-tiny-*``: BEiT 4 x
128, patch 8, 64 px) with BEiT v2's codebook (8192 x 32 unless ``--num-codes``), random encoder weights (unilm's
init) and a trained-looking codebook: spherical k-means (the quantizer's own k-means init) on the encoder features of
the first half of the images; the ids are measured on the second half. Prints one table row per image set and
autocast dtype (bf16 on every CPU, emulated without AVX512-BF16/AMX, hence small sets; fp16 where the device's
autocast supports it).
"""
import argparse
import glob
import os

import numpy as np
import torch
from PIL import Image

from beit_mm.models.tokenizers import VQKD
from beit_mm.models.tokenizers.quantizer import l2norm

STUDY_ARCH = dict(encoder=dict(embed_dims=128, num_layers=4, num_heads=4, mlp_ratio=4.0),
                  decoder=dict(embed_dims=128, num_layers=1, num_heads=4, mlp_ratio=4.0), img_size=64, patch_size=8,
                  code_dims=32, out_dims=128)


@torch.no_grad()
def token_ids(model: VQKD, images: torch.Tensor, dtype: torch.dtype | None, quantizer_autocast: bool) -> torch.Tensor:
    """Ids (B, N) of (B, 3, H, W) RGB 0..255 images: the encoder under ``dtype`` autocast (None = fp32), the encode
    task layer in fp32, the quantizer's distances under the same autocast when ``quantizer_autocast``."""
    device = images.device.type
    x = images.float() / 127.5 - 1.0
    with torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        feats = model.encoder.forward_tokens(x)[0][-1][:, 1:]
    with torch.autocast(device, enabled=False):
        z = l2norm(model.encode_task_layer(feats.float()))
    with torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=dtype is not None and quantizer_autocast):
        ids = model.quantize.nearest(z.reshape(-1, z.shape[-1]))
    return ids.view(z.shape[:-1])


def agreement(model: VQKD, images: torch.Tensor, dtype: torch.dtype) -> dict[str, float]:
    """Fractions of equal ids: beit_mm vs unilm path, and each against fp32."""
    ref = token_ids(model, images, None, False)
    ours = token_ids(model, images, dtype, False)
    theirs = token_ids(model, images, dtype, True)
    return {'beit_mm=unilm': (ours == theirs).float().mean().item(),
            'beit_mm=fp32': (ours == ref).float().mean().item(),
            'unilm=fp32': (theirs == ref).float().mean().item()}


def load_folder(folder: str, size: int, limit: int) -> torch.Tensor:
    paths = sorted(glob.glob(os.path.join(folder, '*')))[:limit]
    if not paths:
        raise FileNotFoundError(f'no images under {folder}; generate the pool with tools/make_demo_data.py '
                                '--dataset shapes (see the module docstring)')
    arrays = [np.asarray(Image.open(p).convert('RGB').resize((size, size), Image.BICUBIC)) for p in paths]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).float()


def build_tokenizer(fit_images: torch.Tensor, num_codes: int, seed: int) -> VQKD:
    """The study arch with random encoder weights and a k-means codebook fitted on ``fit_images``' features."""
    torch.manual_seed(seed)
    model = VQKD(arch=dict(STUDY_ARCH, num_codes=num_codes), with_decoder=False)
    model.init_weights()
    with torch.no_grad():
        feats = model.encoder.forward_tokens(fit_images / 127.5 - 1.0)[0][-1][:, 1:]
        z = l2norm(model.encode_task_layer(feats)).reshape(-1, STUDY_ARCH['code_dims'])
    model.quantize.train()
    model.quantize.init_codebook(z)
    model.quantize.eval()
    return model


def autocast_dtypes(device: str) -> list[torch.dtype]:
    """bf16, and fp16 where this device's autocast accepts it."""
    dtypes = [torch.bfloat16]
    try:
        with torch.autocast(device, dtype=torch.float16):
            torch.ones(2, 2) @ torch.ones(2, 2)
        dtypes.append(torch.float16)
    except (RuntimeError, AssertionError):
        pass
    return dtypes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--folder', required=True, help='study pool images (tools/make_demo_data.py --dataset shapes)')
    parser.add_argument('--num-images', type=int, default=300, help='images read from --folder (half fit k-means)')
    parser.add_argument('--num-codes', type=int, default=8192, help='codebook size (BEiT v2: 8192; the study: 256)')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    pool = load_folder(args.folder, STUDY_ARCH['img_size'], args.num_images)
    half = len(pool) // 2
    model = build_tokenizer(pool[:half], args.num_codes, args.seed)
    g = torch.Generator().manual_seed(args.seed + 1)
    sets = {f'study pool ({len(pool) - half} held-out images)': pool[half:],
            f'random images ({len(pool) - half}, uniform 0..255)': torch.randint(0, 256, pool[half:].shape,
                                                                                  generator=g).float()}
    grid = STUDY_ARCH['img_size'] // STUDY_ARCH['patch_size']
    print(f'tokenizer: study VQ-KD arch, {args.num_codes} codes x {STUDY_ARCH["code_dims"]}, random encoder (seed '
          f'{args.seed}), k-means codebook on {half} pool images; {grid * grid} ids per image')
    print('| images | autocast | ids equal beit_mm vs unilm path | beit_mm vs fp32 | unilm vs fp32 |')
    print('|---|---|---|---|---|')
    for name, images in sets.items():
        for dtype in autocast_dtypes('cpu'):
            r = agreement(model, images, dtype)
            print(f'| {name} | {str(dtype).replace("torch.", "")} | {r["beit_mm=unilm"]:.4f} | '
                  f'{r["beit_mm=fp32"]:.4f} | {r["unilm=fp32"]:.4f} |')


if __name__ == '__main__':
    main()
