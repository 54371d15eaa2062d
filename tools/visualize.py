"""Pictures of what a beit_mm model sees (PNG files).

    # per-head attention of one query patch at one block, plus attention rollout (BEiT or CvT; any task's config)
    python tools/visualize.py attention CONFIG CHECKPOINT IMAGE [--block -1] [--query R C] [--size H W] --out A.png
    # the tokenizer's token ids as a colour map next to the image, and the tokens decoded (a beit_mm.DVAE run)
    python tools/visualize.py tokens DVAE_CONFIG DVAE_CHECKPOINT IMAGE [--size S] --out T.png
    # what codes group: dVAE and/or VQ-KD token maps of the same labeled images side by side, plus how much a token id
    # tells about the patch's class, colour and position (NMI, purity) next to shuffled ids
    # (beit_mm.evaluation.token_groups)
    python tools/visualize.py token-maps --dvae DVAE_CONFIG DVAE_CHECKPOINT --vqkd VQKD_CONFIG VQKD_CHECKPOINT \
        --data-root ROOT --num-classes K [--split validation] [--show 6] [--size 64] [--img-suffix .jpg] \
        [--seg-map-suffix .png] --out T.png
    # MIM: image, blockwise mask, tokenizer reconstruction, model prediction decoded through the dVAE decoder
    python tools/visualize.py mim MIM_CONFIG MIM_CHECKPOINT DVAE_CONFIG DVAE_CHECKPOINT IMAGE [--seed 0] --out M.png

Images are resized (bicubic) to ``--size`` (default: a segmentation config's crop, a MIM config's crop, else 224) and
normalized with the config's ``data_preprocessor`` mean/std; no random augmentation. ``--block`` indexes the
attention modules in forward order (BEiT: blocks 0..L-1; CvT: stage 0, 1, 2 blocks; -1 = the last block); ``--query``
is a (row, col) on that block's query grid (default: its centre). Rollout (Abnar & Zuidema 2020) runs over the blocks
of the last block's grid (a BEiT's all blocks; a CvT's last stage, with strided keys spread over the query grid).
The MIM mask is the config's ``BEiTMaskGenerator`` with ``--seed``; the dVAE must be the one whose encoder is the MIM
model's tokenizer (tools/run_chain.sh trains both).

``--out`` is checked before any model is built (:func:`beit_mm.fileio.outputs.check_output`): an existing file needs
``--overwrite``; a link, an input (config, checkpoint, image), or a path in a data root is refused. The PNG is written
atomically.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch
from mmengine.config import Config
from PIL import Image

import beit_mm  # noqa: F401  (registrations, checkpoint safe globals)
from beit_mm.models.tokenizers.dalle import map_pixels
from beit_mm.fileio.inputs import open_image
from beit_mm.visualization.attention import record_attention
from beit_mm.apis import load_model
from beit_mm.visualization.figures import (attention_figure, mim_figure, save_png, to_uint8, token_map_figure,
                                           token_maps_figure)
from beit_mm.visualization.mim import decode_ids, mim_pictures

DEFAULT_SIZE = 224


def default_size(cfg: Config, args_size) -> tuple[int, int]:
    if args_size:
        return (args_size[0], args_size[-1])
    size = cfg.model.get('data_preprocessor', {}).get('size')
    if size is not None:
        return tuple(size)
    img_size = cfg.get('img_size')
    if isinstance(img_size, int):
        return (img_size, img_size)
    return (DEFAULT_SIZE, DEFAULT_SIZE)


def read_image(path: str, size: tuple[int, int], resample=Image.BICUBIC) -> np.ndarray:
    """RGB uint8 (H, W, 3) resized to ``size`` (H, W)."""
    return np.asarray(open_image(path).convert('RGB').resize((size[1], size[0]), resample))


def normalize(image: np.ndarray, cfg: Config) -> torch.Tensor:
    """(H, W, 3) uint8 RGB -> (1, 3, H, W) with the config's data_preprocessor mean/std (RGB order)."""
    pre = cfg.model.get('data_preprocessor', {})
    mean = torch.tensor(pre.get('mean', [123.675, 116.28, 103.53]), dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(pre.get('std', [58.395, 57.12, 57.375]), dtype=torch.float32).view(1, 3, 1, 1)
    x = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    return (x - mean) / std


def cmd_attention(args) -> None:
    model, cfg = load_model(args.config, args.checkpoint)
    size = default_size(cfg, args.size)
    image = read_image(args.image, size)
    maps = record_attention(model.backbone, normalize(image, cfg))
    amap = maps[args.block]
    query = tuple(args.query) if args.query else (amap.query_grid[0] // 2, amap.query_grid[1] // 2)
    title = args.title or f'{type(model.backbone).__name__}: {args.config.split("/")[-1]}'
    path = save_png(attention_figure(image, maps, args.block, query, title=title), args.out)
    print(f'attention of query {query} at {amap.name} ({len(maps)} blocks recorded) -> {path}')


def cmd_tokens(args) -> None:
    dvae, _ = load_model(args.dvae_config, args.dvae_checkpoint, need=('encoder.', 'decoder.'))
    side = args.size or 8 * 8
    image = read_image(args.image, (side, side), Image.LANCZOS)
    x = torch.from_numpy(image).permute(2, 0, 1)[None].float() / 255
    with torch.no_grad():
        logits = dvae.encode(x)
        grid = tuple(logits.shape[2:])
        ids = logits.argmax(1).flatten(1)
        recon = to_uint8(decode_ids(dvae, ids, grid)[0])
    path = save_png(token_map_figure(image, ids[0], grid, dvae.vocab_size, recon, title=args.title), args.out)
    print(f'{grid[0]}x{grid[1]} tokens, {ids.unique().numel()} distinct of {dvae.vocab_size} -> {path}')


def dvae_token_ids(dvae, images: torch.Tensor) -> torch.Tensor:
    """(N, 3, S, S) RGB 0..255 -> (N, h*w) the dVAE's hard codes (argmax of its encoder), as ``cmd_tokens``."""
    with torch.no_grad():
        return torch.cat([dvae.encode(x / 255).argmax(1).flatten(1) for x in images.split(64)])


def vqkd_token_ids(vqkd, images: torch.Tensor) -> torch.Tensor:
    """(N, 3, S, S) RGB 0..255 -> (N, h*w) VQ-KD ids (``VQKD.get_token_ids``, unilm's ``get_codebook_indices``)."""
    return torch.cat([vqkd.get_token_ids(x) for x in images.split(64)])


def cmd_token_maps(args) -> None:
    from beit_mm.evaluation.probe import ade20k_dataset_cfg, build_seg_dataset, load_seg_split
    from beit_mm.evaluation.token_groups import token_group_stats
    if not (args.dvae or args.vqkd):
        raise SystemExit('token-maps: give --dvae CONFIG CHECKPOINT and/or --vqkd CONFIG CHECKPOINT')
    dataset = build_seg_dataset(ade20k_dataset_cfg(args.data_root, args.split, args.num_classes, args.img_suffix,
                                                   args.seg_map_suffix))
    split = load_seg_split(dataset, args.size)
    maps, rows = {}, []
    for name, spec, need, tokenize, vocab in (
            ('dVAE', args.dvae, ('encoder.', ), dvae_token_ids, lambda m: m.vocab_size),
            ('VQ-KD', args.vqkd, ('encoder.', 'quantize.'), vqkd_token_ids, lambda m: m.num_codes)):
        if not spec:
            continue
        model, _ = load_model(spec[0], spec[1], need=need)
        ids = tokenize(model, split.images)
        maps[name] = (ids, vocab(model))
        s = token_group_stats(ids, split.labels, split.images, args.num_classes)
        rows.append(f'| {name} | {s["codes_used"]} of {vocab(model)} | {s["nmi_class"]:.3f} '
                    f'({s["nmi_class_shuffled"]:.3f}) | {s["nmi_colour"]:.3f} ({s["nmi_colour_shuffled"]:.3f}) | '
                    f'{s["nmi_position"]:.3f} ({s["nmi_position_shuffled"]:.3f}) | '
                    f'{s["purity"]:.1f} ({s["purity_majority"]:.1f}) |')
    show = slice(0, args.show)
    images = split.images[show].permute(0, 2, 3, 1).numpy().astype(np.uint8)
    figure = token_maps_figure(images, split.labels[show].numpy(), {k: (v[0][show], v[1]) for k, v in maps.items()},
                               args.num_classes, title=args.title)
    path = save_png(figure, args.out)
    print(f'What the codes group on {len(dataset)} {args.split} images of {args.data_root} '
          f'({split.labels.shape[-1]} px; {maps[next(iter(maps))][0].shape[1]} patches each); in brackets the trivial '
          'baseline (shuffled ids; for purity the majority class):\n')
    print('| tokenizer | codes used | NMI(id; class) | NMI(id; colour) | NMI(id; position) | purity % |\n'
          '|---|---|---|---|---|---|')
    print('\n'.join(rows))
    print(f'\n-> {path}')


def mask_generator(cfg: Config, seed: int):
    from beit_mm.data.masking import BEiTMaskGenerator
    for t in cfg.train_dataloader.dataset.pipeline:
        if t['type'].split('.')[-1] == 'BEiTMaskGenerator':
            kwargs = {k: v for k, v in t.items() if k != 'type'}
            kwargs['seed'] = seed
            return BEiTMaskGenerator(**kwargs)
    raise ValueError('the MIM config has no BEiTMaskGenerator in train_dataloader.dataset.pipeline')


def cmd_mim(args) -> None:
    model, cfg = load_model(args.config, args.checkpoint, need=('backbone.', 'head.'))
    dvae, _ = load_model(args.dvae_config, args.dvae_checkpoint, need=('encoder.', 'decoder.'))
    size = default_size(cfg, args.size)
    gen = mask_generator(cfg, args.seed)
    grid = (gen.generator.height, gen.generator.width)
    if (size[0] // grid[0], size[1] // grid[1]) != (size[0] / grid[0], size[1] / grid[1]):
        raise ValueError(f'--size {size} is not a multiple of the mask grid {grid}')
    down = model.target_generator.downsample
    image = read_image(args.image, size)
    tokenizer_image = read_image(args.image, (grid[0] * down, grid[1] * down), Image.LANCZOS)
    target = map_pixels(torch.from_numpy(tokenizer_image).permute(2, 0, 1)[None].float() / 255)
    mask = torch.from_numpy(gen.transform({})['mask'])[None]
    pics = mim_pictures(model, dvae, normalize(image, cfg), target, mask)
    path = save_png(mim_figure(image, tokenizer_image, pics, title=args.title), args.out)
    print(f'{int(mask.sum())} of {mask.numel()} patches masked, masked-token accuracy {pics.accuracy:.3f} -> {path}')


def inputs_of(args: argparse.Namespace) -> list[str]:
    """The files and folders a command reads (none of them may be its ``--out``); a work dir given as a checkpoint
    is the checkpoint it names (a picture may go into the work dir)."""
    from beit_mm.apis import resolve_checkpoint

    def checkpoint_file(path: str) -> str:
        try:
            return resolve_checkpoint(path)
        except FileNotFoundError:
            return path  # named when the model is loaded

    configs = [getattr(args, n) for n in ('config', 'dvae_config', 'image', 'data_root') if getattr(args, n, None)]
    checkpoints = [getattr(args, n) for n in ('checkpoint', 'dvae_checkpoint') if getattr(args, n, None)]
    for pair in (getattr(args, 'dvae', None), getattr(args, 'vqkd', None)):
        if pair:
            configs.append(pair[0])
            checkpoints.append(pair[1])
    return configs + [checkpoint_file(path) for path in checkpoints]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Pictures of what a beit_mm model sees')
    sub = parser.add_subparsers(dest='command', required=True)
    att = sub.add_parser('attention', help='per-head attention of a query patch + attention rollout')
    att.add_argument('config')
    att.add_argument('checkpoint')
    att.add_argument('image')
    att.add_argument('--block', type=int, default=-1, help='attention module index in forward order (-1: last)')
    att.add_argument('--query', type=int, nargs=2, metavar=('ROW', 'COL'), help='query patch (default: centre)')
    att.add_argument('--size', type=int, nargs='+', metavar=('H', 'W'), help='input size')
    tok = sub.add_parser('tokens', help="a dVAE's token ids as a colour map, and the decoded tokens")
    tok.add_argument('dvae_config')
    tok.add_argument('dvae_checkpoint')
    tok.add_argument('image')
    tok.add_argument('--size', type=int, help='square tokenizer input side (default 64)')
    mim = sub.add_parser('mim', help='MIM: mask, tokenizer reconstruction and decoded prediction')
    maps = sub.add_parser('token-maps', help='dVAE / VQ-KD token maps of labeled images and what their codes group')
    maps.add_argument('--dvae', nargs=2, metavar=('CONFIG', 'CHECKPOINT'), help='a beit_mm.DVAE run')
    maps.add_argument('--vqkd', nargs=2, metavar=('CONFIG', 'CHECKPOINT'), help='a beit_mm.VQKD run')
    maps.add_argument('--data-root', required=True, help='ADE20K-layout root (raw labels 1..K)')
    maps.add_argument('--num-classes', type=int, required=True)
    maps.add_argument('--split', default='validation', choices=('training', 'validation'))
    maps.add_argument('--show', type=int, default=6, help='images in the picture (the statistics use all)')
    maps.add_argument('--size', type=int, default=64, help='tokenizer input side (both tokenizers)')
    maps.add_argument('--img-suffix', default='.jpg')
    maps.add_argument('--seg-map-suffix', default='.png')
    mim.add_argument('config')
    mim.add_argument('checkpoint')
    mim.add_argument('dvae_config')
    mim.add_argument('dvae_checkpoint')
    mim.add_argument('image')
    mim.add_argument('--seed', type=int, default=0, help='seed of the blockwise mask')
    mim.add_argument('--size', type=int, nargs='+', metavar=('H', 'W'), help='backbone view size')
    for p in (att, tok, maps, mim):
        p.add_argument('--out', required=True, help='PNG file to write')
        p.add_argument('--overwrite', action='store_true', help='replace --out if it exists (refused otherwise)')
        p.add_argument('--title', default='', help='figure title')
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from beit_mm.fileio.outputs import OutputError, check_output
    try:
        check_output(args.out, args.overwrite, inputs=inputs_of(args))  # before any model is built
    except OutputError as error:
        raise SystemExit(f'visualize: {error}') from None
    torch.manual_seed(0)
    {'attention': cmd_attention, 'tokens': cmd_tokens, 'token-maps': cmd_token_maps, 'mim': cmd_mim}[args.command](args)


if __name__ == '__main__':
    main()
