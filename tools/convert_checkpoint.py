"""Convert an official/foreign checkpoint into a beit_mm state dict file ``{'state_dict': ...}``.

Examples:
    python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth beit-b_pt22k.pth
    python tools/convert_checkpoint.py --model beit --source hf pytorch_model.bin beit-b.pth --img-size 640
    python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth cvt-13.pth
    python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl dalle_encoder.pth
    python tools/convert_checkpoint.py --model dalle --source dvae work_dirs/dvae-.../iter_200.pth tokenizer.pth
    python tools/convert_checkpoint.py --model vqkd --source unilm vqkd_encoder_base_decoder_3x768x12_clip.pth vqkd.pth
    python tools/convert_checkpoint.py --model vqkd --source mmpretrain vqkd_encoder.pth vqkd_tokenize_only.pth
    python tools/convert_checkpoint.py --model dino --source official dino_vitbase16_pretrain.pth dino_vitb16.pth

The other way, a beit_mm training checkpoint (or work dir) -> HF transformers folder / timm state dict
(``beit_mm.apis.hub``; the model is built from ``--config``, default the config stored in the checkpoint):
    python tools/convert_checkpoint.py --to hf work_dirs/RUN/iter_1000.pth hf_dir [--config CONFIG] [--part backbone]
    python tools/convert_checkpoint.py --to timm work_dirs/RUN/iter_1000.pth timm/beit.pth [--config CONFIG]

Files are read with ``torch.load(weights_only=True)`` except the official DALL-E ``encoder.pkl``, a pickled module
that only the ``openai`` DALL-E source unpickles (trusted files only). HF ``*.safetensors`` files are read with
safetensors when it is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from beit_mm.converters import beit as beit_conv  # noqa: E402
from beit_mm.converters.io import load_state_dict_file  # noqa: E402

MODELS = {
    'beit': beit_conv.SOURCES,
    'cvt': ('official', 'hf'),
    'dalle': ('openai', 'mmpretrain', 'dvae'),
    'vqkd': ('unilm', 'mmpretrain'),
    'dino': ('official', ),
}


def read_source(path: str, model: str, source: str) -> dict:
    if model == 'dalle' and source == 'openai':
        from beit_mm.converters.dalle import load_openai_encoder
        return load_openai_encoder(path)
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        return load_file(path)
    return load_state_dict_file(path)


def convert(args: argparse.Namespace) -> dict:
    src = read_source(args.src, args.model, args.source)
    if args.model == 'beit':
        return beit_conv.convert_beit(
            src, args.source, img_size=args.img_size, patch_size=args.patch_size,
            expand_shared_bias=not args.keep_shared_rel_pos_bias, keep_mim_head=args.keep_mim_head,
            keep_head=args.keep_head)
    if args.img_size is not None:
        raise SystemExit(f'--img-size applies to --model beit only, not {args.model}')
    if args.model == 'cvt':
        from beit_mm.converters.cvt import convert_cvt
        out = convert_cvt(src, args.source)
        return out if args.keep_head else {k: v for k, v in out.items() if not k.startswith('head.')}
    if args.model == 'vqkd':  # the tokenizer without its teacher; mmpretrain files have no decoder
        from beit_mm.converters.vqkd import convert_vqkd
        return convert_vqkd(src, args.source)
    if args.model == 'dino':  # DINO ViT -> beit_mm BEiT (a VQ-KD teacher: beit_mm.BackboneTeacher)
        from beit_mm.converters.vqkd import convert_dino_vit
        return convert_dino_vit(src)
    if args.source == 'dvae':  # the encoder of a dVAE trained with configs/dvae/
        from beit_mm.converters.dvae import extract_dvae_encoder
        return extract_dvae_encoder(src)
    from beit_mm.converters.dalle import convert_dalle
    return convert_dalle(src, args.source)


def export_checkpoint(args: argparse.Namespace) -> None:
    """``--to hf|timm``: build the run's model, load the checkpoint strictly, write the HF folder / timm file."""
    from mmengine.config import Config

    import beit_mm  # noqa: F401  (registrations)
    from beit_mm.apis import build_from_config, resolve_checkpoint
    from beit_mm.apis.hub import save_hf, save_timm
    path = resolve_checkpoint(args.src)
    checkpoint = torch.load(path, map_location='cpu', weights_only=True)
    meta = checkpoint.get('meta') or {}
    if args.config:
        cfg = Config.fromfile(args.config)
    elif meta.get('cfg'):
        cfg = Config.fromstring(meta['cfg'], file_format='.py')
    else:
        raise SystemExit(f'{path} stores no config (meta.cfg); pass the config it was trained with: --config CONFIG')
    model = build_from_config(cfg)
    model.load_state_dict(load_state_dict_file(path), strict=True)
    classes = list((meta.get('dataset_meta') or {}).get('classes') or []) or None
    from beit_mm.converters.hf_config import HFIncompatible
    try:
        if args.to == 'hf':
            hf_model = save_hf(model, args.dst, classes=classes, part=args.part)
        else:
            kwargs = save_timm(model, args.dst, beit_v2=args.beitv2)
    except HFIncompatible as error:
        raise SystemExit(f'{path}: {error}. Nothing was written (docs/export.md lists what HF and timm can hold; '
                         '--part backbone converts only the backbone)') from None
    if args.to == 'hf':
        print(f'wrote {args.dst}: {type(hf_model).__name__} (config.json, model.safetensors) from {path}')
    else:
        print(f'wrote {args.dst} and timm_model.json: timm.create_model(**json.load(open(...))) builds '
              f'{kwargs["model_name"]} with these weights')


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='checkpoint to convert')
    parser.add_argument('dst', help='output file (a dict with key "state_dict")')
    parser.add_argument('--model', choices=sorted(MODELS), help='architecture of SRC (with --source)')
    parser.add_argument('--source',
                        help='layout of SRC: ' + '; '.join(f'{m}: {", ".join(s)}' for m, s in MODELS.items()))
    parser.add_argument('--img-size', type=int, default=None,
                        help='BEiT: resample relative position tables / position embeddings to this image size')
    parser.add_argument('--patch-size', type=int, default=16, help='BEiT patch size (for --img-size)')
    parser.add_argument('--keep-mim-head', action='store_true', help='BEiT: keep mask_token and lm_head.*')
    parser.add_argument('--keep-head', action='store_true',
                        help='BEiT/CvT: keep the classifier head.* (and BEiT\'s fc_norm.*)')
    parser.add_argument('--keep-shared-rel-pos-bias', action='store_true',
                        help='BEiT: keep the shared rel_pos_bias table instead of copying it into every block')
    parser.add_argument('--to', choices=['hf', 'timm'], default=None,
                        help='the other way: SRC is a beit_mm checkpoint (or work dir), DST an HF folder / timm file')
    parser.add_argument('--config', default=None, help='--to: the config SRC was trained with (default: meta.cfg)')
    parser.add_argument('--part', choices=['auto', 'backbone'], default='auto',
                        help='--to hf: the whole model (auto) or only its backbone (BeitModel / CvtModel)')
    parser.add_argument('--beitv2', action='store_true', help='--to timm: name the model beitv2_* instead of beit_*')
    args = parser.parse_args(argv)
    if args.to is not None:
        export_checkpoint(args)
        return
    if args.model is None or args.source is None:
        parser.error('--model and --source are required (or --to hf|timm for the other way)')
    if args.source not in MODELS[args.model]:
        parser.error(f'--source {args.source} is not a {args.model} layout; choose one of {MODELS[args.model]}')
    state_dict = convert(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.dst)), exist_ok=True)
    torch.save({'state_dict': state_dict}, args.dst)
    with open(args.dst, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f'wrote {len(state_dict)} tensors ({sum(v.numel() for v in state_dict.values()) / 1e6:.2f}M values) to '
          f'{args.dst} (sha256 {digest[:16]})')


if __name__ == '__main__':
    main()
