"""Export a trained beit_mm model to ONNX at a fixed input size, and check it with onnxruntime against PyTorch.

    python tools/export.py CONFIG CHECKPOINT --format onnx --shape H W --out FILE [--part auto|backbone]

- ``CHECKPOINT``: a ``tools/train.py`` checkpoint or work dir (its last checkpoint); with ``--part backbone`` also a
  backbone-only state dict (``tools/convert_checkpoint.py`` output).
- ``--part auto``: a segmentation config exports the segmentor (``logits`` (B, K, H, W) at the input size; a panoptic
  or instance EoMT its raw ``class_logits`` (B, Q, C + 1) and ``mask_logits`` (B, Q, H/4, W/4)), an mmpretrain
  classification config the classifier (``logits`` (B, num_classes)), anything else its backbone (``feat0``, ...).
  ``--part backbone``: the backbone of any config.
- ``--shape H W``: the exported input size (a segmentor's crop size; divisible by the patch size). The relative
  position bias is resolved for this grid in PyTorch before export; the graph has no resampling.
- The input is the normalized image (the config's ``data_preprocessor`` mean/std and channel order, stored in the
  file's metadata); ``tools/infer.py --onnx FILE`` does that, plus the slide windows of the config's ``test_cfg``.
- ``--batch``: the exported batch size; ``--dynamic-batch`` makes the batch axis of the input and outputs dynamic
  (every other size stays static). Opset 17: onnxruntime and TensorRT 8.6+ read it (docs/export.md).
- One file: the weights are inside it, never external data; a model over 2 GiB of weights is refused.
- ``--out`` is checked before anything is loaded (:func:`beit_mm.fileio.outputs.check_output`): an existing file needs
  ``--overwrite``; a link, the config or checkpoint, or a path in a dataset root is refused. Written atomically.
- After writing, runs onnxruntime and PyTorch on the same random batch and prints the max |diff| of the
  outputs and where the argmax maps agree (``--no-check`` skips it).
"""
from __future__ import annotations

import argparse
import os.path as osp

import torch

NEEDED = {'classifier': ('backbone.', 'neck.', 'head.'), 'backbone': ('backbone.', )}  # segmentors: by their type


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='the config the checkpoint was trained with')
    parser.add_argument('checkpoint', help='checkpoint file or work dir')
    parser.add_argument('--format', choices=['onnx'], default='onnx', help='export format')
    parser.add_argument('--shape', type=int, nargs=2, required=True, metavar=('H', 'W'), help='input size')
    parser.add_argument('--out', required=True, help='output file')
    parser.add_argument('--batch', type=int, default=1, help='the exported batch size (traced with it)')
    parser.add_argument('--dynamic-batch', action='store_true', help='a dynamic batch axis (other sizes static)')
    parser.add_argument('--part', choices=['auto', 'backbone'], default='auto',
                        help='what to export: the whole model (auto) or its backbone')
    parser.add_argument('--no-check', action='store_true', help='skip the onnxruntime vs PyTorch check')
    parser.add_argument('--overwrite', action='store_true', help='replace --out if it exists (refused otherwise)')
    return parser.parse_args(argv)


def load_for_export(config: str, checkpoint: str, kind: str):
    """The config's model with the checkpoint's weights (a backbone-only state dict too when ``kind='backbone'``)."""
    from mmengine.config import Config

    from beit_mm.apis import build_from_config, load_model, resolve_checkpoint, segmentor_inference_weights
    from beit_mm.apis.checkpoint import check_weights_match
    from beit_mm.fileio import load_state_dict_file
    if kind == 'backbone':
        path = resolve_checkpoint(checkpoint)
        state_dict = load_state_dict_file(path)
        if not any(k.startswith('backbone.') for k in state_dict):  # a bare backbone file
            cfg = Config.fromfile(config)
            model = build_from_config(cfg)
            check_weights_match(model.backbone, state_dict, f'{path} (a backbone file, with config {config})')
            model.backbone.load_state_dict(state_dict, strict=True)
            return model, cfg
    need = segmentor_inference_weights(Config.fromfile(config)) if kind == 'segmentor' else NEEDED[kind]
    return load_model(config, checkpoint, need=need)


def checkpoint_dataset_meta(checkpoint: str) -> str | None:
    """``meta.dataset_meta`` (classes, palette) of a training checkpoint as bounded JSON text
    (:func:`beit_mm.apis.export.dataset_meta_json`), or None."""
    from beit_mm.apis import resolve_checkpoint
    from beit_mm.apis.export import dataset_meta_json
    from beit_mm.fileio import open_checkpoint
    obj = open_checkpoint(resolve_checkpoint(checkpoint))
    meta = (obj.get('meta') or {}).get('dataset_meta') if isinstance(obj, dict) else None
    return dataset_meta_json(meta, checkpoint) if isinstance(meta, dict) and meta else None


def check_onnx(module: torch.nn.Module, path: str, shape: tuple[int, int], batch: int = 1,
               seed: int = 0) -> dict[str, float | int]:
    """onnxruntime vs PyTorch on one random normal batch (:func:`beit_mm.apis.export.compare_outputs`)."""
    import onnxruntime as ort

    from beit_mm.apis.export import INPUT_NAME, compare_outputs
    x = torch.randn(batch, 3, *shape, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ref = module(x)
    ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    got = session.run(None, {INPUT_NAME: x.numpy()})
    return compare_outputs(got, [r.numpy() for r in ref])


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from beit_mm.apis.checkpoint import CheckpointMismatchError
    from beit_mm.apis.export import ExportError
    from beit_mm.fileio.names import refusal
    from beit_mm.fileio import CheckpointFileError
    from beit_mm.fileio.outputs import OutputError
    try:
        export(args)
    except (OutputError, FileNotFoundError, CheckpointFileError, CheckpointMismatchError, ExportError) as error:
        raise refusal('export.py', error) from None


def export(args: argparse.Namespace) -> None:
    from mmengine.config import Config

    from beit_mm.apis import resolve_checkpoint
    from beit_mm.apis.export import (INPUT_NAME, describe_comparison, export_module, export_onnx, model_kind,
                                     preprocess_metadata)
    from beit_mm.fileio.outputs import check_output
    # before minutes of loading and tracing; a work dir's checkpoint is the file it names, so --out may go there
    check_output(args.out, args.overwrite, inputs=[args.config, resolve_checkpoint(args.checkpoint)])
    cfg = Config.fromfile(args.config)
    kind = 'backbone' if args.part == 'backbone' else model_kind(cfg)
    model, cfg = load_for_export(args.config, args.checkpoint, kind)
    shape = tuple(args.shape)
    metadata = {**preprocess_metadata(cfg), 'beit_mm.config': osp.basename(args.config)}
    dataset_meta = checkpoint_dataset_meta(args.checkpoint)
    if dataset_meta:  # class names and palette for tools/infer.py --onnx
        metadata['dataset_meta'] = dataset_meta
    names = export_onnx(model, kind, shape, args.out, batch=args.batch, metadata=metadata,
                        dynamic_batch=args.dynamic_batch)
    print(f'wrote {args.out}: {kind}, input {INPUT_NAME} ({args.batch}, 3, {shape[0]}, {shape[1]}) -> {", ".join(names)} '
          f'({osp.getsize(args.out) / 1e6:.1f} MB)')
    if not args.no_check:
        module = export_module(model, kind, shape)
        for batch in (args.batch, args.batch + 1) if args.dynamic_batch else (args.batch, ):
            result = check_onnx(module, args.out, shape, batch=batch)
            print(f'onnxruntime vs PyTorch (fp32, batch {batch}): {describe_comparison(result)}')


if __name__ == '__main__':
    main()
