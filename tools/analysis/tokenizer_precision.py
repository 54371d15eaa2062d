"""How many token ids of beit_mm's tokenizers change under bf16 (or fp16) autocast instead of fp32, on images of the
study pool and on random images: VQ-KD (also with its quantizer under autocast, unilm's rule), the DALL-E dVAE encoder
and the VQ-KD teachers (CLIP ViT-B/16, DINO ViT-B/16).

    python tools/make_demo_data.py --dataset shapes --root data/shapes_precision --num-train 300 --num-val 0 \
        --seed 1 --no-annotations
    python tools/analysis/tokenizer_precision.py --folder data/shapes_precision/images/training
    python tools/analysis/tokenizer_precision.py --folder data/shapes_precision/images/training \
        --tokenizers vqkd-base dalle clip dino --num-images 64   # the real-size architectures

No trained weights can be downloaded here: every tokenizer is its real architecture (or the study's, ``vqkd``) with
random weights made here, a stand-in for the released ones (a trained network's logit margins and feature spread
differ, so the released files must be measured again before relying on a figure). The decision rule of the configs:
bf16 where >= 99% of the ids agree with fp32.

VQ-KD (``vqkd``: the study's arch, ``configs/studies/vqkd-tiny-*``, BEiT 4 x 128, patch 8, 64 px; ``vqkd-base``: BEiT
v2's ``base_decoder_3x_clip`` encoder, 12 x 768, patch 16, 224 px): BEiT v2's codebook (8192 x 32 unless
``--num-codes``), random encoder weights (unilm's init) and a trained-looking codebook: spherical k-means (the
quantizer's own k-means init) on the encoder features of the first half of the images; the ids are measured on the
second half. unilm (``beit2/modeling_vqkd.py`` lines 152-164, called under ``torch.cuda.amp.autocast()`` by
``engine_for_pretraining.py`` lines 54-56) runs the encoder and the quantizer's distance matmul under the step's fp16
autocast and only ``encode_task_layer`` in fp32; beit_mm's ``VQKD`` autocasts the encoder only. Paths compared, all
with the same weights:

- ``fp32``: everything fp32 (the reference);
- ``beit_mm``: encoder under autocast, task layer and quantizer fp32 (``VQKD.get_token_ids``);
- ``unilm``: encoder and quantizer under autocast, task layer fp32.

DALL-E (``dalle``): ``beit_mm.DALLEEncoder`` at its released size (4 groups x 2 blocks, 256 wide, 8192 logits) with
``dall_e``'s init (N(0, 1/fan_in), seeded), on 112 x 112 views (BEiT's tokenizer input: 14 x 14 ids); ids = argmax of
the logits, ``autocast_dtype='bfloat16'`` (input conv and groups; output conv fp32) against None.

Teachers (``clip``, ``dino``: ``CLIPTeacher`` ViT-B/16 and the DINO ``BackboneTeacher`` of
``configs/vqkd/*dino*``, random weights, 224 px): they give VQ-KD's regression targets, not ids, and run fp32 in
beit_mm (unilm: under the step's fp16 autocast, ``engine_for_vqkd.py`` line 59). Measured: the cosine of each patch
feature under autocast with its fp32 value (mean and minimum) and, as the downstream id agreement, the nearest
code of a spherical k-means codebook (``--teacher-codes``, fitted on the fp32 features of the first half) for the
held-out half.

Prints one markdown table row per tokenizer, image set and autocast dtype (bf16 on every CPU, emulated without
AVX512-BF16/AMX, hence small sets; fp16 where the device's autocast supports it).
"""
from __future__ import annotations

import argparse
import glob
import os
from typing import TYPE_CHECKING

import numpy as np
import torch
from PIL import Image

if TYPE_CHECKING:
    from beit_mm.models.tokenizers import VQKD, BackboneTeacher, CLIPTeacher, DALLEEncoder

STUDY_ARCH = dict(encoder=dict(embed_dims=128, num_layers=4, num_heads=4, mlp_ratio=4.0),
                  decoder=dict(embed_dims=128, num_layers=1, num_heads=4, mlp_ratio=4.0), img_size=64, patch_size=8,
                  code_dims=32, out_dims=128)


@torch.no_grad()
def token_ids(model: VQKD, images: torch.Tensor, dtype: torch.dtype | None, quantizer_autocast: bool) -> torch.Tensor:
    """Ids (B, N) of (B, 3, H, W) RGB 0..255 images: the encoder under ``dtype`` autocast (None = fp32), the encode
    task layer in fp32, the quantizer's distances under the same autocast when ``quantizer_autocast``."""
    from beit_mm.models.tokenizers.quantizer import l2norm
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
    from beit_mm.fileio.inputs import open_image
    paths = sorted(glob.glob(os.path.join(folder, '*')))[:limit]
    if not paths:
        raise FileNotFoundError(f'no images under {folder}; generate the pool with tools/make_demo_data.py '
                                '--dataset shapes (see the module docstring)')
    arrays = [np.asarray(open_image(p).convert('RGB').resize((size, size), Image.BICUBIC)) for p in paths]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).float()


def build_tokenizer(fit_images: torch.Tensor, num_codes: int, seed: int, arch: dict = STUDY_ARCH) -> VQKD:
    """``arch`` (the study's by default) with random encoder weights and a k-means codebook fitted on ``fit_images``'
    features."""
    from beit_mm.models.tokenizers import VQKD
    from beit_mm.models.tokenizers.quantizer import l2norm
    torch.manual_seed(seed)
    model = VQKD(arch=dict(arch, num_codes=num_codes), with_decoder=False)
    model.init_weights()
    with torch.no_grad():
        feats = model.encoder.forward_tokens(fit_images / 127.5 - 1.0)[0][-1][:, 1:]
        z = l2norm(model.encode_task_layer(feats)).reshape(-1, arch['code_dims'])
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


@torch.no_grad()
def dalle_ids(encoder: DALLEEncoder, images: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """(B, 196) ids of (B, 3, 112, 112) RGB 0..255 images, the groups under ``dtype`` autocast (None = fp32)."""
    from beit_mm.models.tokenizers.dalle import map_pixels
    encoder.autocast_dtype = None if dtype is None else str(dtype).replace('torch.', '')
    return encoder.get_token_ids(map_pixels(images / 255.0))


def dalle_agreement(encoder: DALLEEncoder, images: torch.Tensor, dtype: torch.dtype) -> dict[str, float]:
    ref = dalle_ids(encoder, images, None)
    return {'ids=fp32': (dalle_ids(encoder, images, dtype) == ref).float().mean().item()}


@torch.no_grad()
def teacher_features(teacher: CLIPTeacher | BackboneTeacher, images: torch.Tensor,
                     dtype: torch.dtype | None) -> torch.Tensor:
    """(B, N, D) fp32 patch features of the teacher's network run under ``dtype`` autocast (None = fp32), as its
    ``forward`` (which itself always runs fp32) computes them."""
    from beit_mm.models.tokenizers import CLIPTeacher
    x = teacher.normalize(images)
    with torch.autocast(images.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        if isinstance(teacher, CLIPTeacher):
            out = teacher.visual(x)
        else:
            out = teacher.backbone(x)[-1].flatten(2).transpose(1, 2)
    return out.float()


def teacher_agreement(teacher, fit: torch.Tensor, held_out: torch.Tensor, dtype: torch.dtype,
                      num_codes: int) -> dict[str, float]:
    """Cosine of the held-out features under autocast with fp32 (mean, min), and the agreement of their nearest
    codes in a spherical k-means codebook fitted on the fp32 features of ``fit``."""
    from beit_mm.models.tokenizers.quantizer import l2norm, spherical_kmeans
    ref = teacher_features(teacher, held_out, None)
    low = teacher_features(teacher, held_out, dtype)
    cos = torch.nn.functional.cosine_similarity(low, ref, dim=-1)
    samples = l2norm(teacher_features(teacher, fit, None).reshape(-1, ref.shape[-1]))
    means, _ = spherical_kmeans(samples, num_codes)
    ids = [(l2norm(f.reshape(-1, f.shape[-1])) @ means.t()).argmax(-1) for f in (ref, low)]
    return {'cos mean': cos.mean().item(), 'cos min': cos.min().item(),
            'ids=fp32': (ids[0] == ids[1]).float().mean().item()}


def build_teacher(name: str, seed: int) -> CLIPTeacher | BackboneTeacher:
    """CLIP ViT-B/16 or the DINO ViT-B/16 teacher of configs/vqkd (random weights: the stand-in)."""
    from beit_mm.models.tokenizers import BackboneTeacher, CLIPTeacher
    torch.manual_seed(seed)
    if name == 'clip':
        return CLIPTeacher()
    teacher = BackboneTeacher(backbone=dict(type='beit_mm.BEiT', arch='base', img_size=224, patch_size=16,
                                            use_abs_pos_emb=True, use_rel_pos_bias=False, layer_scale_init_value=0.0,
                                            drop_path_rate=0.0, final_norm=True))
    teacher.backbone.init_weights()
    return teacher


def resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Bicubic resize of (B, 3, H, W) RGB 0..255 images, clamped to 0..255."""
    if images.shape[-1] == size:
        return images
    return torch.nn.functional.interpolate(images, size=(size, size), mode='bicubic', align_corners=False).clamp(0, 255)


TOKENIZERS = ('vqkd', 'vqkd-base', 'dalle', 'clip', 'dino')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--folder', required=True, help='study pool images (tools/make_demo_data.py --dataset shapes)')
    parser.add_argument('--num-images', type=int, default=300, help='images read from --folder (half fit k-means)')
    parser.add_argument('--num-codes', type=int, default=8192, help='codebook size (BEiT v2: 8192; the study: 256)')
    parser.add_argument('--teacher-codes', type=int, default=512,
                        help='k-means codes on the teacher features (the downstream id agreement)')
    parser.add_argument('--tokenizers', nargs='+', choices=TOKENIZERS, default=['vqkd'])
    parser.add_argument('--dtypes', nargs='+', choices=('bfloat16', 'float16'), default=None,
                        help='autocast dtypes (default: bf16, and fp16 where the CPU autocast takes it; fp16 is '
                             'emulated on most CPUs, hence slow)')
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    from beit_mm.engine.amp_optim_wrapper import describe_cpu
    from beit_mm.models.tokenizers import DALLEEncoder
    from beit_mm.models.tokenizers.vqkd import ARCHS
    dtypes = [getattr(torch, d) for d in args.dtypes] if args.dtypes else autocast_dtypes('cpu')
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    print(f'CPU: {describe_cpu()}; torch {torch.__version__}')
    print('| tokenizer | images | autocast | ids = fp32 | other |')
    print('|---|---|---|---|---|')
    for name in args.tokenizers:
        size = {'vqkd': STUDY_ARCH['img_size'], 'vqkd-base': ARCHS['base_decoder_3x_clip']['img_size'],
                'dalle': 112}.get(name, 224)
        pool = load_folder(args.folder, size, args.num_images)
        half = len(pool) // 2
        g = torch.Generator().manual_seed(args.seed + 1)
        sets = {f'study pool ({len(pool) - half} held-out)': pool[half:],
                f'random ({len(pool) - half}, uniform 0..255)': torch.randint(0, 256, pool[half:].shape,
                                                                             generator=g).float()}
        if name in ('vqkd', 'vqkd-base'):
            arch = STUDY_ARCH if name == 'vqkd' else ARCHS['base_decoder_3x_clip']
            model = build_tokenizer(pool[:half], args.num_codes, args.seed, arch)
            label = f'VQ-KD {name} ({args.num_codes} codes, k-means on {half} pool images)'
        elif name == 'dalle':
            torch.manual_seed(args.seed)
            model = DALLEEncoder()  # the released size; dall_e's init
            label = 'DALL-E encoder (released size, dall_e init)'
        else:
            model = build_teacher(name, args.seed)
            label = f'{name.upper()} ViT-B/16 teacher ({args.teacher_codes} k-means codes on {half} pool images)'
        for set_name, images in sets.items():
            for dtype in dtypes:
                dt = str(dtype).replace('torch.', '')
                if name in ('vqkd', 'vqkd-base'):
                    r = agreement(model, images, dtype)
                    row = (f'{r["beit_mm=fp32"]:.4f} | unilm path (quantizer under autocast) = fp32 '
                           f'{r["unilm=fp32"]:.4f}, beit_mm = unilm {r["beit_mm=unilm"]:.4f}')
                elif name == 'dalle':
                    row = f'{dalle_agreement(model, images, dtype)["ids=fp32"]:.4f} | '
                else:
                    fit = pool[:half] if set_name.startswith('study') else torch.randint(
                        0, 256, pool[:half].shape, generator=torch.Generator().manual_seed(args.seed + 2)).float()
                    r = teacher_agreement(model, fit, images, dtype, args.teacher_codes)
                    row = f'{r["ids=fp32"]:.4f} | feature cosine mean {r["cos mean"]:.6f}, min {r["cos min"]:.6f}'
                print(f'| {label} | {set_name} | {dt} | {row} |', flush=True)


if __name__ == '__main__':
    main()
