"""Photo-like JPEGs in ImageNet's training layout, for timing input pipelines (no download needed).

Each image is 1/f noise in three correlated colour channels, saved at JPEG quality 90: about 0.6 bytes per pixel,
ImageNet's order, so it decodes as slowly as a photograph. Layout: ``root/train/<wnid>/<wnid>_<i>.JPEG`` and
``root/meta/train.txt``.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

from .root import KEEP, UPDATE, open_demo_root
from .imagenet import demo_wnids

# amplitude ~ 1 / f ** SPECTRAL_SLOPE (natural images: about 1)
SPECTRAL_SLOPE = 1.0
JPEG_QUALITY = 90


def photo_like_image(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """One (height, width, 3) uint8 RGB image with a photograph's 1/f spectrum."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    freq = np.sqrt(fy**2 + fx**2)
    freq[0, 0] = 1.0
    amplitude = freq**-SPECTRAL_SLOPE
    channels = [np.fft.irfft2(amplitude * np.exp(1j * rng.uniform(0, 2 * np.pi, freq.shape)), s=(height, width))
                for _ in range(3)]
    mix = np.eye(3) + 0.3 * rng.normal(0.0, 1.0, (3, 3))  # correlated colour channels
    image = np.stack(channels, -1) @ mix
    image = (image - image.mean()) / image.std() * rng.uniform(30, 60) + rng.uniform(70, 180, 3)
    image += rng.normal(0.0, 4.0, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def make_photo_imagenet(root: str, count: int, height: int = 375, width: int = 500, num_classes: int = 4,
                        seed: int = 0) -> str:
    """Write ``count`` photo-like JPEGs in ImageNet's training layout under ``root``; an equal root is kept.

    Raises:
        NotADemoRootError: ``root`` holds other files; nothing written.
    """
    if count < 1 or num_classes < 1 or min(height, width) < 16:
        raise ValueError(f'make_photo_imagenet needs count, num_classes >= 1 and sides >= 16; got {count}, '
                         f'{num_classes}, {height} x {width}')
    wnids = demo_wnids(num_classes)
    files = [f'{wnids[i % num_classes]}/{wnids[i % num_classes]}_{i}.JPEG' for i in range(count)]
    arguments = dict(count=count, height=height, width=width, num_classes=num_classes, seed=seed)
    tree = open_demo_root(root, 'beit_mm.data.demo_photos.make_photo_imagenet', arguments,
                          [f'train/{f}' for f in files] + ['meta/train.txt'])
    if tree.mode == KEEP:
        return root
    rng = np.random.default_rng(seed)
    if tree.mode != UPDATE or not tree.complete(f"train/{f}" for f in files):
        for name in files:
            tree.save_image(f'train/{name}', Image.fromarray(photo_like_image(height, width, rng)),
                            quality=JPEG_QUALITY)
    tree.write_text('meta/train.txt', ''.join(f'{f} {wnids.index(f.split("/")[0])}\n' for f in files))
    tree.finish()
    return root
