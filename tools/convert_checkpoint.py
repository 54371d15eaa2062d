"""Convert an official/foreign checkpoint into a beit_mm state dict file ``{'state_dict': ...}``.

Examples:
    python tools/convert_checkpoint.py --model beit --source unilm beit_base_patch16_224_pt22k.pth beit-b_pt22k.pth
    python tools/convert_checkpoint.py --model beit --source hf pytorch_model.bin beit-b.pth --img-size 640
    python tools/convert_checkpoint.py --model cvt --source official CvT-13-224x224-IN-1k.pth cvt-13.pth
    python tools/convert_checkpoint.py --model dalle --source openai encoder.pkl dalle_encoder.pth
    python tools/convert_checkpoint.py --model clip --source openai --trust-code ViT-B-16.pt clip_visual.pth
    python tools/convert_checkpoint.py --model dalle --source dvae work_dirs/dvae-.../iter_200.pth tokenizer.pth
    python tools/convert_checkpoint.py --model vqkd --source unilm vqkd_encoder_base_decoder_3x768x12_clip.pth vqkd.pth
    python tools/convert_checkpoint.py --model vqkd --source mmpretrain vqkd_encoder.pth vqkd_tokenize_only.pth
    python tools/convert_checkpoint.py --model dino --source official dino_vitbase16_pretrain.pth dino_vitb16.pth
    python tools/convert_checkpoint.py --model eomt --source hf model.safetensors eomt-large-512_ade20k.pth
    python tools/convert_checkpoint.py --model eomt --source hf --drop-class-head model.safetensors eomt-l_no-head.pth
    python tools/convert_checkpoint.py --model eomt --source beit_mm --drop-class-head work_dirs/RUN/iter_1000.pth \
        eomt_no-head.pth
    python tools/convert_checkpoint.py --model vit_adapter --source official --keep-head \
        upernet_beit_adapter_large_640_160k_ade20k.pth.tar upernet_beit-adapter-large_ade20k.pth
    python tools/convert_checkpoint.py --model dinov2 --source timm --img-size 512 --patch-size 16 \
        vit_large_patch14_reg4_dinov2.lvd142m.safetensors dinov2-l-reg4_p16-512.pth

The other way, a beit_mm training checkpoint (or work dir) -> HF transformers folder / timm state dict
(``beit_mm.apis.hub``; the model is built from ``--config``: the config source a checkpoint stores is code and is
never run):
    python tools/convert_checkpoint.py --to hf work_dirs/RUN/iter_1000.pth hf_dir --config CONFIG [--part backbone]
    python tools/convert_checkpoint.py --to timm work_dirs/RUN/iter_1000.pth timm/beit.pth --config CONFIG

Outputs are written atomically (a kill leaves the old file, the new one or nothing); an existing DST is refused
unless ``--overwrite``, and so is a DST that is a link, SRC or ``--config``, or lies in a dataset root
(:func:`beit_mm.fileio.outputs.check_output`). An HF folder carries a manifest of its files
(``.beit_mm_output.json``): ``--overwrite`` replaces a folder only when it holds nothing else.

Files are read with ``torch.load(weights_only=True)`` except the official DALL-E ``encoder.pkl``, a pickled module
that only the ``openai`` DALL-E source unpickles, and OpenAI's TorchScript CLIP release, which only ``--model clip
--source openai --trust-code`` loads (both run code the file carries: trusted files only). HF ``*.safetensors`` files are read with
safetensors when it is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import os.path as osp

import torch

from beit_mm.converters import beit as beit_conv
from beit_mm.apis.checkpoint import CheckpointMismatchError
from beit_mm.fileio import CheckpointFileError, load_state_dict_file

MODELS = {
    'beit': beit_conv.SOURCES,
    'cvt': ('official', 'hf'),
    'dalle': ('openai', 'mmpretrain', 'dvae'),
    'clip': ('openai', 'hf'),
    'vqkd': ('unilm', 'mmpretrain'),
    'dino': ('official', ),
    'eomt': ('hf', 'beit_mm'),
    'dinov2': ('timm', ),
    'vit_adapter': ('official', ),
}


def read_source(path: str, model: str, source: str, trust_code: bool = False) -> dict:
    if not osp.isdir(path):  # a FIFO or a device: named before any reader opens it (and waits forever)
        from beit_mm.fileio.inputs import check_regular_file
        check_regular_file(path, 'checkpoint')
    if model == 'clip':  # OpenAI's TorchScript file (trusted by name) or an HF folder -> OpenAI names
        from beit_mm.models.tokenizers.teachers import load_clip_state_dict
        return load_clip_state_dict(path, trust_code=trust_code)
    if model == 'dalle' and source == 'openai':
        from beit_mm.converters.dalle import load_openai_encoder
        return load_openai_encoder(path)
    if path.endswith('.safetensors'):
        from beit_mm.fileio.checkpoint import load_safetensors
        return load_safetensors(path)
    return load_state_dict_file(path)


def convert(args: argparse.Namespace) -> dict:
    if args.drop_class_head and args.model != 'eomt':
        raise SystemExit(f'--drop-class-head applies to --model eomt only, not {args.model} (BEiT/CvT files keep their '
                         'classifier only with --keep-head)')
    if args.model == 'vit_adapter':  # czczup/ViT-Adapter BEiT segmentor -> BEiTAdapter (+ UPerNet heads, class meta)
        from beit_mm.converters.vit_adapter import convert_vit_adapter_checkpoint
        from beit_mm.fileio.checkpoint import open_checkpoint
        if args.img_size is not None:
            raise SystemExit('--img-size applies to --model beit and dinov2 only, not vit_adapter')
        return convert_vit_adapter_checkpoint(open_checkpoint(args.src), keep_heads=args.keep_head)
    src = read_source(args.src, args.model, args.source, args.trust_code)
    if args.model == 'clip':  # the vision tower, as CLIPTeacher loads it
        return {k: v for k, v in src.items() if k.startswith('visual.')}
    if args.model == 'beit':
        return beit_conv.convert_beit(
            src, args.source, img_size=args.img_size, patch_size=args.patch_size,
            expand_shared_bias=not args.keep_shared_rel_pos_bias, keep_mim_head=args.keep_mim_head,
            keep_head=args.keep_head)
    if args.model == 'dinov2':  # timm DINOv2 with registers, patch embedding and positions resampled (EoMT's start)
        from beit_mm.converters.dinov2 import convert_dinov2
        if args.img_size is None:
            raise SystemExit('--model dinov2 needs --img-size (and --patch-size, default 16): the grid the position '
                             'embedding and patch embedding are resampled to, e.g. --img-size 512 for EoMT ADE20K')
        return convert_dinov2(src, args.img_size, args.patch_size)
    if args.img_size is not None:
        raise SystemExit(f'--img-size applies to --model beit and dinov2 only, not {args.model}')
    if args.model == 'cvt':
        from beit_mm.converters.cvt import convert_cvt
        out = convert_cvt(src, args.source)
        return out if args.keep_head else {k: v for k, v in out.items() if not k.startswith('head.')}
    if args.model == 'vqkd':  # the tokenizer without its teacher; mmpretrain files have no decoder
        from beit_mm.converters.vqkd import convert_vqkd
        return convert_vqkd(src, args.source)
    if args.model == 'eomt':  # HF EomtForUniversalSegmentation -> beit_mm.EoMT on a DINOv2-style BEiT; or beit_mm's
        from beit_mm.converters.eomt import check_beit_mm_eomt, drop_class_head, hf_eomt_to_beit_mm
        out = hf_eomt_to_beit_mm(src) if args.source == 'hf' else check_beit_mm_eomt(src)
        return drop_class_head(out) if args.drop_class_head else out
    if args.model == 'dino':  # DINO ViT -> beit_mm BEiT (a VQ-KD teacher: beit_mm.BackboneTeacher)
        from beit_mm.converters.vqkd import convert_dino_vit
        return convert_dino_vit(src)
    if args.source == 'dvae':  # the encoder of a dVAE trained with configs/dvae/
        from beit_mm.converters.dvae import extract_dvae_encoder
        return extract_dvae_encoder(src)
    from beit_mm.converters.dalle import convert_dalle
    return convert_dalle(src, args.source)


def read_checkpoint_for_export(path: str, config: str | None):
    """``--to``: the checkpoint's weights and meta, and ``config`` (required: the config source a checkpoint stores is
    Python code, which beit_mm never runs; :mod:`beit_mm.apis.checkpoint`)."""
    from mmengine.config import Config

    from beit_mm.fileio import open_checkpoint, unwrap_state_dict
    if not config:
        raise SystemExit(f'--to needs --config CONFIG, the config {path} was trained with. beit_mm does not build a '
                         'model from the config stored inside a checkpoint: that is Python code from whoever made the '
                         'file, and loading must not run it. Nothing was written')
    checkpoint = open_checkpoint(path)
    return unwrap_state_dict(checkpoint), checkpoint.get('meta') or {}, Config.fromfile(config)


def export_checkpoint(args: argparse.Namespace) -> None:
    """``--to hf|timm``: build ``--config``'s model, load the checkpoint strictly, write the HF folder / timm file."""
    import beit_mm  # noqa: F401  (registrations)
    from beit_mm.apis import build_from_config, resolve_checkpoint
    from beit_mm.apis.checkpoint import check_weights_match
    from beit_mm.apis.hub import save_hf, save_timm, timm_json_path
    from beit_mm.fileio.outputs import check_output
    path = resolve_checkpoint(args.src)
    inputs = [path, args.config]
    check_output(args.dst, args.overwrite, kind='folder' if args.to == 'hf' else 'file', inputs=inputs)
    if args.to == 'timm':
        check_output(timm_json_path(args.dst), args.overwrite, inputs=inputs)
    state_dict, meta, cfg = read_checkpoint_for_export(path, args.config)
    model = build_from_config(cfg)
    check_weights_match(model, state_dict, f'{path} (with --config {args.config})')
    model.load_state_dict(state_dict, strict=True)
    classes = list((meta.get('dataset_meta') or {}).get('classes') or []) or None
    from beit_mm.converters.hf_config import HFIncompatible
    try:
        if args.to == 'hf':
            hf_class = save_hf(model, args.dst, classes=classes, part=args.part)
        else:
            kwargs = save_timm(model, args.dst, beit_v2=args.beitv2)
    except HFIncompatible as error:
        raise SystemExit(f'{path}: {error}. Nothing was written (docs/export.md lists what HF and timm can hold; '
                         '--part backbone converts only the backbone)') from None
    if args.to == 'hf':
        print(f'wrote {args.dst}: {hf_class} (config.json, model.safetensors) from {path}')
    else:
        print(f'wrote {args.dst} and {timm_json_path(args.dst)}: timm.create_model(**json.load(open(...))) builds '
              f'{kwargs["model_name"]} with these weights')


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help='checkpoint to convert')
    parser.add_argument('dst', help='output file (a dict with key "state_dict"); --to hf: a folder')
    parser.add_argument('--model', choices=sorted(MODELS), help='architecture of SRC (with --source)')
    parser.add_argument('--source',
                        help='layout of SRC: ' + '; '.join(f'{m}: {", ".join(s)}' for m, s in MODELS.items()))
    parser.add_argument('--img-size', type=int, default=None,
                        help='BEiT: resample relative position tables / position embeddings to this image size; '
                        'DINOv2: the image size of the position embedding (required)')
    parser.add_argument('--patch-size', type=int, default=16,
                        help='BEiT patch size (for --img-size); DINOv2: the patch size its 14-px kernel is resampled to')
    parser.add_argument('--trust-code', action='store_true',
                        help='--model clip --source openai: load OpenAI\'s TorchScript file with torch.jit.load, which '
                        'runs code the file carries (only for a file you trust)')
    parser.add_argument('--keep-mim-head', action='store_true', help='BEiT: keep mask_token and lm_head.*')
    parser.add_argument('--keep-head', action='store_true',
                        help='BEiT/CvT: keep the classifier head.* (and BEiT\'s fc_norm.*); vit_adapter: keep the '
                        'UPerNet decode_head.*/auxiliary_head.* (a whole segmentor, for tools/infer.py and test.py; '
                        'a Mask2Former head is refused)')
    parser.add_argument('--drop-class-head', action='store_true',
                        help='EoMT: leave out class_head.* to fine-tune on a new class set (load_from=DST with the new '
                        'num_classes; the class head keeps its init, everything else loads; official '
                        'load_ckpt_class_head=False)')
    parser.add_argument('--keep-shared-rel-pos-bias', action='store_true',
                        help='BEiT: keep the shared rel_pos_bias table instead of copying it into every block')
    parser.add_argument('--to', choices=['hf', 'timm'], default=None,
                        help='the other way: SRC is a beit_mm checkpoint (or work dir), DST an HF folder / timm file')
    parser.add_argument('--config', default=None,
                        help='--to: the config SRC was trained with (required: the config a checkpoint stores is '
                        'code, never run)')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace DST if it exists (for --to hf the whole folder); without it an existing DST is '
                        'refused')
    parser.add_argument('--part', choices=['auto', 'backbone'], default='auto',
                        help='--to hf: the whole model (auto) or only its backbone (BeitModel / CvtModel)')
    parser.add_argument('--beitv2', action='store_true', help='--to timm: name the model beitv2_* instead of beit_*')
    args = parser.parse_args(argv)
    from beit_mm.fileio.outputs import OutputError
    try:
        run(parser, args)
    except (OutputError, FileNotFoundError, CheckpointFileError, CheckpointMismatchError) as error:
        raise SystemExit(f'convert_checkpoint: {error}') from None
    except (ValueError, KeyError) as error:  # a converter meeting keys or shapes of another layout
        if args.to is not None:
            raise SystemExit(f'convert_checkpoint: {args.src} (with --config {args.config}) cannot be written --to '
                             f'{args.to}: {type(error).__name__}: {error}. Nothing was written (docs/export.md lists '
                             'what HF and timm can hold; --part backbone converts only the backbone)') from None
        raise SystemExit(f'convert_checkpoint: {args.src} cannot be converted as --model {args.model} --source '
                         f'{args.source}: {error}{describe_source(args.src)}. Fix: choose the --model/--source of the '
                         'file\'s origin (tools/convert_checkpoint.py --help lists them; docs/checkpoints.md)') from None


def describe_source(path: str) -> str:
    """'; the file looks like <kind>' from its keys, or '' when that cannot be told (never raises)."""
    from beit_mm.fileio.checkpoint import checkpoint_kind
    try:
        kind = checkpoint_kind(load_state_dict_file(path))
    except Exception:  # noqa: BLE001  (only a hint for the message above)
        return ''
    return f'; the file looks like {kind}' if kind else ''


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from beit_mm.fileio.outputs import atomic_file, check_output
    if args.to is not None:
        export_checkpoint(args)
        return
    if args.model is None or args.source is None:
        parser.error('--model and --source are required (or --to hf|timm for the other way)')
    if args.source not in MODELS[args.model]:
        parser.error(f'--source {args.source} is not a {args.model} layout; choose one of {MODELS[args.model]}')
    check_output(args.dst, args.overwrite, inputs=[args.src])
    converted = convert(args)  # a state dict; vit_adapter: the whole file (state_dict + the source's class meta)
    checkpoint = converted if args.model == 'vit_adapter' else {'state_dict': converted}
    state_dict = checkpoint['state_dict']
    with atomic_file(args.dst) as tmp:
        torch.save(checkpoint, tmp)
    with open(args.dst, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f'wrote {len(state_dict)} tensors ({sum(v.numel() for v in state_dict.values()) / 1e6:.2f}M values) to '
          f'{args.dst} (sha256 {digest[:16]})')


if __name__ == '__main__':
    main()
