"""FLOPs and parameters of a config's model (segmentor, classifier or masked-image-modeling model).

    python tools/analysis/get_flops.py CONFIG [--shape H W] [--show-table]

Counted by :func:`beit_mm.evaluation.flops.complexity`, the project's one counter (one multiply-add = 1 FLOP; what
runs for a segmentor, a classifier and a MIM model is in that module's docstring), on one image of ``H x W`` with
random weights (no checkpoint is read: every ``init_cfg`` of type ``Pretrained`` is dropped; the training-only
auxiliary head is removed, as mmseg 0.x's ``get_flops.py`` did). Default shape: a segmentor's
``data_preprocessor.size`` (its crop), else 224 x 224.

Prints ``Flops: <x>G`` and ``Params: <y>M`` (mmengine's ``flops_str``/``params_str``, 3 significant digits) plus the
exact counts (a MIM model's also without its frozen tokenizer); ``--show-table`` adds the per-module table.
"""
from __future__ import annotations

import argparse

from mmengine.config import DictAction


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='FLOPs and parameters of a beit_mm config')
    parser.add_argument('config', help='config file')
    parser.add_argument('--shape', type=int, nargs='+', metavar=('H', 'W'),
                        help='input size (one value for square); default: the crop of a segmentation config, else '
                        '224 x 224')
    parser.add_argument('--show-table', action='store_true', help='print the per-module table')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config keys, k=v ...')
    return parser.parse_args()



def main() -> None:
    args = parse_args()
    import torch
    from mmengine.config import Config

    from beit_mm.apis import build_from_config
    from beit_mm.evaluation.flops import complexity, default_shape, model_kind
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    torch.set_num_threads(max(1, min(4, torch.get_num_threads())))
    model = build_from_config(cfg, drop_auxiliary_head=True)  # the auxiliary head is training-only
    kind = model_kind(model)
    if args.shape is None:
        shape = default_shape(cfg, kind)
    elif len(args.shape) == 1:
        shape = (args.shape[0], args.shape[0])
    elif len(args.shape) == 2:
        shape = tuple(args.shape)
    else:
        raise ValueError(f'--shape takes H W or one side, got {args.shape}')
    result = complexity(model, shape, args.show_table)
    split = '=' * 30
    if args.show_table:
        print(result['out_table'])
    print(f'{split}\nModel: {kind} ({type(model).__name__})\nInput shape: {shape}\n'
          f'Flops: {result["flops_str"]}\nParams: {result["params_str"]}\n'
          f'Flops (exact): {result["flops"]}\nParams (exact): {result["params"]}')
    if kind == 'mim':
        print(f'Flops without the tokenizer (exact): {result["flops"] - result["tokenizer_flops"]}')
    print(split)


if __name__ == '__main__':
    main()
