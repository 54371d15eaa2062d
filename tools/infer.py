"""Segment images or folders with a beit_mm segmentation config and checkpoint (a thin CLI over
:func:`beit_mm.apis.segment.run_infer`, i.e. mmseg's ``MMSegInferencer``), writing colour overlays and label maps.

    python tools/infer.py CONFIG CHECKPOINT INPUT [INPUT ...] [--out-dir DIR] [--opacity A] [--device cpu|cuda]
    python tools/infer.py CONFIG --onnx FILE INPUT [INPUT ...] [--out-dir DIR] [--opacity A]

- ``CHECKPOINT``: a ``.pth`` file, or a work dir (its ``last_checkpoint``, i.e. what ``tools/train.py`` wrote last).
- ``INPUT``: image files and/or folders (every image directly inside a folder, sorted by name); each image must be a
  regular file (a FIFO or device is refused, never waited on) within the pixel limit (``BEIT_MM_MAX_IMAGE_PIXELS``,
  Pillow's by default), checked from its header before the model is built (docs/faults.md).
- Writes ``DIR/vis/<image path>``: the image with the predicted classes painted over it (``--opacity``, class names
  and palette from the checkpoint's ``meta.dataset_meta``), and ``DIR/pred/<image path without suffix>.png``: the
  predicted label map (uint8 class indices, the config's label space). ``<image path>`` is the image's path relative
  to the folder all inputs share; two images whose label maps would share a name (``a.jpg`` and ``a.png``) are
  refused, naming both.
- ``DIR`` is an output folder (:class:`beit_mm.fileio.output_folder.OutputFolder`): new, empty, or written by an
  earlier run, whose files ``--overwrite`` replaces (only those); checked before the model is built.
- The checkpoint must fit the config's model: another model's checkpoint is a named error before any image is
  segmented.
- ``--onnx FILE`` (a file of ``tools/export.py``; no CHECKPOINT then): the same pipeline, normalization, slide windows
  and resizing, in Python around onnxruntime (:mod:`beit_mm.apis.onnx_inference`).
- A panoptic or instance EoMT config (checkpoint or ``--onnx``): ``DIR/pred/<stem>.png`` + ``.json`` (COCO panoptic
  PNG and its ``segments_info``) or ``DIR/pred/<stem>.json`` (instances: labels, scores, boxes, RLE masks, as mmdet's
  ``DetInferencer``), the same post-processing for both (:mod:`beit_mm.apis.mask_inference`).
"""
from __future__ import annotations

import argparse
import os.path as osp


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Segment images with a beit_mm config and checkpoint')
    parser.add_argument('config', help='segmentation config file')
    parser.add_argument('paths', nargs='+', metavar='CHECKPOINT INPUT',
                        help='checkpoint file or work dir (not with --onnx), then image files and/or folders')
    parser.add_argument('--onnx', default=None, metavar='FILE', help='run this tools/export.py file with onnxruntime')
    parser.add_argument('--out-dir', default='work_dirs/infer', help='output folder (vis/ and pred/ inside)')
    parser.add_argument('--opacity', type=float, default=0.5, help='opacity of the painted classes, in (0, 1]')
    parser.add_argument('--device', default=None, help="'cpu', 'cuda', ... (default: cuda if available)")
    parser.add_argument('--batch-size', type=int, default=1, help='images per forward pass')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the files an earlier run wrote into --out-dir (only those; refused otherwise)')
    args = parser.parse_args()
    if args.onnx is None:
        if len(args.paths) < 2:
            parser.error('give CHECKPOINT and at least one INPUT (or --onnx FILE and INPUTs)')
        args.checkpoint, args.inputs = args.paths[0], args.paths[1:]
    else:
        args.checkpoint, args.inputs = None, args.paths
    del args.paths
    return args


def main() -> None:
    args = parse_args()
    from beit_mm.apis.checkpoint import CheckpointFileError, CheckpointMismatchError
    from beit_mm.fileio.names import refusal
    from beit_mm.apis.segment import run_infer
    from beit_mm.fileio.outputs import OutputError
    try:
        preds = run_infer(**vars(args))
    except (CheckpointFileError, CheckpointMismatchError, OutputError, FileNotFoundError, ValueError) as error:
        raise refusal('infer.py', error) from None
    print(f'segmented {len(preds)} images: overlays in {osp.join(args.out_dir, "vis")}, label maps in '
          f'{osp.join(args.out_dir, "pred")}')


if __name__ == '__main__':
    main()
