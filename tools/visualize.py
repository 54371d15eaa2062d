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

COMMANDS = {'attention': 'draw_attention', 'tokens': 'draw_tokens', 'token-maps': 'draw_token_maps', 'mim': 'draw_mim'}


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
    args = vars(parse_args(argv))
    from beit_mm.apis import visualize
    from beit_mm.fileio.names import refusal
    from beit_mm.fileio.outputs import OutputError
    try:
        getattr(visualize, COMMANDS[args.pop('command')])(**args)
    except (OutputError, visualize.VisualizationError) as error:
        raise refusal('visualize.py', error) from None


if __name__ == '__main__':
    main()
