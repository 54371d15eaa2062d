"""The 'digits' demo style: real handwriting, four digits per image on a noisy textured background.

The glyphs are scikit-learn's bundled UCI digits (8x8); validation images use glyphs training never sees. Label =
digit + 1 on ink pixels, 0 ("other") elsewhere.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image

from .imagenet import TEXTURES, texture

DIGIT_CLASSES = tuple(str(d) for d in range(10))  # raw label d + 1 for digit d
NUM_DIGIT_CLASSES = len(DIGIT_CLASSES)
TRAIN_GLYPHS = 1500  # of the 1797: glyphs 0..1499 draw training images, 1500..1796 validation images
GLYPH_SCALE = (0.32, 0.45)  # glyph side as a fraction of the image side
INK_THRESHOLD = 0.5  # fraction of the full ink (16) from which a pixel is labeled as the digit
MIN_COLOUR_DISTANCE = 60.0  # least RGB distance between a digit's colour and the background's
INKS = ('colour', 'dark')  # 'colour': any colour far from a random background; 'dark': dark ink on light paper
PAPER_RANGE = (150.0, 255.0)  # ink='dark': each background channel uniform in this range
DARK_INK_RANGE = (0.0, 80.0)  # ink='dark': each ink channel uniform in this range


@lru_cache(maxsize=1)
def load_glyphs() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's UCI digits: glyphs (1797, 8, 8) float32 in [0, 1] and digits (1797,) int64."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as error:
        raise ImportError('the digits demo style reads the UCI handwritten digits bundled with scikit-learn, which is '
                          'not installed. Fix: bash tools/setup_env.sh (it pins scikit-learn), or pip install '
                          'scikit-learn') from error
    digits = load_digits()
    return (digits.images / 16.0).astype(np.float32), digits.target.astype(np.int64)


def glyph_indices(split: str) -> np.ndarray:
    """The glyphs a split draws from: ``'training'`` the first :data:`TRAIN_GLYPHS`, ``'validation'`` the rest."""
    total = len(load_glyphs()[1])
    if split == 'training':
        return np.arange(TRAIN_GLYPHS)
    if split == 'validation':
        return np.arange(TRAIN_GLYPHS, total)
    raise ValueError(f'unknown split {split!r}; use training or validation')


def _colour(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(0, 255, 3).astype(np.float32)


def _ink_colour(rng: np.random.Generator, background: np.ndarray, ink: str) -> np.ndarray:
    if ink == 'dark':
        return rng.uniform(*DARK_INK_RANGE, 3).astype(np.float32)
    colour = _colour(rng)
    while np.linalg.norm(colour - background) < MIN_COLOUR_DISTANCE:
        colour = _colour(rng)
    return colour


def make_digits_sample(size: int,
                       rng: np.random.Generator,
                       split: str = 'training',
                       ink: str = 'colour') -> tuple[np.ndarray, np.ndarray]:
    """One RGB image and its raw label map: 0 = other, d + 1 = digit d.

    Args:
        size: image side in pixels.
        rng: the generator every random choice is drawn from.
        split: ``'training'`` or ``'validation'``: the glyph pool.
        ink: ``'colour'`` (ink of any colour far from a random background) or ``'dark'`` (dark ink on light paper).
    """
    if ink not in INKS:
        raise ValueError(f'unknown ink {ink!r}; use one of {INKS}')
    glyphs, digits = load_glyphs()
    pool = glyph_indices(split)
    background = rng.uniform(*PAPER_RANGE, 3).astype(np.float32) if ink == 'dark' else _colour(rng)
    image = background + 30.0 * texture(TEXTURES[rng.integers(len(TEXTURES))], size)[..., None]
    label_map = np.zeros((size, size), np.uint8)
    half = size // 2
    for qy in range(2):
        for qx in range(2):
            k = int(pool[rng.integers(len(pool))])
            side = int(round(rng.uniform(*GLYPH_SCALE) * size))
            side = min(side, half)
            alpha = np.asarray(Image.fromarray(glyphs[k]).resize((side, side), Image.BILINEAR), np.float32)
            alpha = np.clip(alpha, 0.0, 1.0)
            y0 = qy * half + int(rng.integers(0, half - side + 1))
            x0 = qx * half + int(rng.integers(0, half - side + 1))
            colour = _ink_colour(rng, background, ink)
            patch = image[y0:y0 + side, x0:x0 + side]
            image[y0:y0 + side, x0:x0 + side] = patch * (1 - alpha[..., None]) + colour * alpha[..., None]
            label_map[y0:y0 + side, x0:x0 + side][alpha >= INK_THRESHOLD] = digits[k] + 1
    image += rng.normal(0.0, 6.0, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), label_map
