"""Segment images or folders with a beit_mm segmentation config and checkpoint (a thin CLI over mmseg's
``MMSegInferencer``), writing colour overlays and label maps.

    python tools/infer.py CONFIG CHECKPOINT INPUT [INPUT ...] [--out-dir DIR] [--opacity A] [--device cpu|cuda]

- ``CHECKPOINT``: a ``.pth`` file, or a work dir (its ``last_checkpoint``, i.e. what ``tools/train.py`` wrote last).
- ``INPUT``: image files and/or folders (every image directly inside a folder, sorted by name).
- Writes ``DIR/vis/<image name>``: the image with the predicted classes painted over it (``--opacity``, mmseg's
  ``SegLocalVisualizer``, class names and palette from the checkpoint's ``meta.dataset_meta``), and
  ``DIR/pred/<image stem>.png``: the predicted label map (uint8 class indices, the config's label space; for the
  ADE20K configs 0..149 = ADE20K classes 1..150).
- The config's test pipeline (resize) and ``test_cfg`` (whole image or slide windows) are used, as ``tools/test.py``.
"""
from __future__ import annotations

import argparse
import os
import os.path as osp

import numpy as np
from PIL import Image

import beit_mm  # noqa: F401  (registrations, checkpoint safe globals)
from beit_mm.apis import resolve_checkpoint

IMAGE_SUFFIXES = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Segment images with a beit_mm config and checkpoint')
    parser.add_argument('config', help='segmentation config file')
    parser.add_argument('checkpoint', help='checkpoint file, or a work dir (its last checkpoint)')
    parser.add_argument('inputs', nargs='+', help='image files and/or folders of images')
    parser.add_argument('--out-dir', default='work_dirs/infer', help='output folder (vis/ and pred/ inside)')
    parser.add_argument('--opacity', type=float, default=0.5, help='opacity of the painted classes, in (0, 1]')
    parser.add_argument('--device', default=None, help="'cpu', 'cuda', ... (default: cuda if available)")
    parser.add_argument('--batch-size', type=int, default=1, help='images per forward pass')
    return parser.parse_args()


def list_images(inputs: list[str]) -> list[str]:
    """Image files of ``inputs`` (files kept in order, folders expanded to their sorted images)."""
    images = []
    for item in inputs:
        if osp.isdir(item):
            found = sorted(osp.join(item, f) for f in os.listdir(item) if f.lower().endswith(IMAGE_SUFFIXES))
            if not found:
                raise FileNotFoundError(f'folder {item} has no images ({", ".join(IMAGE_SUFFIXES)})')
            images += found
        elif osp.isfile(item):
            images.append(item)
        else:
            raise FileNotFoundError(f'input {item} is neither an image file nor a folder')
    return images


def infer(config: str, checkpoint: str, inputs: list[str], out_dir: str, opacity: float = 0.5,
          device: str | None = None, batch_size: int = 1) -> dict[str, np.ndarray]:
    """Run ``MMSegInferencer`` on ``inputs``; write ``out_dir/vis/<name>`` and ``out_dir/pred/<stem>.png``.

    Returns:
        {image path: predicted label map (H, W) int64, the image's own size}.
    """
    from mmengine.config import Config
    from mmseg.apis import MMSegInferencer

    cfg = Config.fromfile(config)
    if cfg.get('default_scope', 'mmseg') != 'mmseg' or 'decode_head' not in cfg.model:
        raise ValueError(f'{config} is not a segmentation config (default_scope mmseg with a decode_head); '
                         'tools/infer.py segments images')
    images = list_images(inputs)
    inferencer = MMSegInferencer(model=cfg, weights=resolve_checkpoint(checkpoint), device=device)
    samples = inferencer(images, out_dir=out_dir, opacity=opacity, batch_size=batch_size, return_datasamples=True)
    samples = samples if isinstance(samples, list) else [samples]
    os.makedirs(osp.join(out_dir, 'pred'), exist_ok=True)
    preds = {}
    for path, sample in zip(images, samples):
        label = sample.pred_sem_seg.data[0].cpu().numpy()
        Image.fromarray(label.astype(np.uint8)).save(
            osp.join(out_dir, 'pred', osp.splitext(osp.basename(path))[0] + '.png'))
        preds[path] = label
    return preds


def main() -> None:
    args = parse_args()
    preds = infer(args.config, args.checkpoint, args.inputs, args.out_dir, args.opacity, args.device,
                  args.batch_size)
    print(f'segmented {len(preds)} images: overlays in {osp.join(args.out_dir, "vis")}, label maps in '
          f'{osp.join(args.out_dir, "pred")}')


if __name__ == '__main__':
    main()
