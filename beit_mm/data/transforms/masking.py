"""BEiT's blockwise mask generator: which patches of the ``(H, W)`` patch grid the backbone sees as ``[M]``.

The mask is a bool ``(H, W)`` ndarray, row-major like the token sequence, **True = masked**. BEiT v1's rule (unilm
``beit/masking_generator.py``) places rectangles of random area and log-uniform aspect, each adding 1..budget new
patches, until the count is reached or ten tries in a row fail; BEiT v2's rule (``exact_count=True``) fills the
shortfall with random unmasked patches. Draws follow unilm's order, so both rules match unilm draw for draw.
"""
import math
from typing import NamedTuple

import numpy as np
from mmcv.transforms import BaseTransform

from beit_mm.registry import TRANSFORMS


class TooFewMaskedPatchesError(ValueError):
    """The mask generator's arguments give (nearly) empty masks, hence a NaN MIM loss."""


NUM_ATTEMPTS_PER_BLOCK = 10


class MaskBlock(NamedTuple):
    """One accepted rectangle of the patch grid, its drawn area and aspect, its budget and new patches."""
    top: int
    left: int
    height: int
    width: int
    target_area: float
    aspect_ratio: float
    budget: int
    num_new: int


def _uniform(rng: np.random.Generator, a: float, b: float) -> float:
    """``random.uniform(a, b)``: ``a + (b - a) * U[0, 1)``, valid for ``b < a`` too."""
    return a + (b - a) * float(rng.random())


class BlockwiseMaskGenerator:
    """BEiT's blockwise masking of an ``(H, W)`` patch grid; called with a ``Generator``, returns the mask.

    Args:
        input_size: the patch grid, ``H`` or ``(H, W)``.
        num_masking_patches: patches to mask; an upper bound unless ``exact_count``.
        min_num_patches / max_num_patches: target area range of a rectangle; None max = ``num_masking_patches``.
        min_aspect / max_aspect: aspect ratio range (log-uniform); None max = ``1 / min_aspect``.
        exact_count: BEiT v2's rule (always exactly ``num_masking_patches``) instead of v1's.
    """

    def __init__(self,
                 input_size: int | tuple[int, int],
                 num_masking_patches: int,
                 min_num_patches: int = 16,
                 max_num_patches: int | None = None,
                 min_aspect: float = 0.3,
                 max_aspect: float | None = None,
                 exact_count: bool = False) -> None:
        if isinstance(input_size, int):
            input_size = (input_size, input_size)
        self.height, self.width = (int(s) for s in input_size)
        if self.height < 2 or self.width < 2:
            raise ValueError(f'input_size {input_size} is too small: rectangles must be strictly smaller than the '
                             'grid, so both sides must be at least 2 patches')
        if not 0 < num_masking_patches <= self.height * self.width:
            raise ValueError(f'num_masking_patches={num_masking_patches} must be in [1, {self.height * self.width}] '
                             f'for a {self.height}x{self.width} grid')
        if min_num_patches < 1:
            raise ValueError(f'min_num_patches={min_num_patches} must be >= 1')
        if num_masking_patches < min_num_patches:
            raise TooFewMaskedPatchesError(
                f'num_masking_patches={num_masking_patches} < min_num_patches={min_num_patches}: blocks are drawn '
                f'with {num_masking_patches}..{min_num_patches} patches but may add at most {num_masking_patches}, so '
                'most draws are rejected and masks come out smaller than asked or empty; a batch without masked '
                'patches makes the MIM loss NaN (unilm issue 551, --num_mask_patches 1). Fix: mask about 40% of the '
                f'grid (num_masking_patches=75 of 14x14, or mask_ratio=0.4), or min_num_patches <= '
                f'{num_masking_patches}.')
        max_aspect = 1 / min_aspect if max_aspect is None else max_aspect
        if not 0 < min_aspect <= max_aspect:
            raise ValueError(f'need 0 < min_aspect <= max_aspect, got min_aspect={min_aspect}, '
                             f'max_aspect={max_aspect}')
        self.num_masking_patches = int(num_masking_patches)
        self.min_num_patches = int(min_num_patches)
        self.max_num_patches = self.num_masking_patches if max_num_patches is None else int(max_num_patches)
        self.min_aspect = float(min_aspect)
        self.max_aspect = float(max_aspect)
        self.log_aspect_ratio = (math.log(self.min_aspect), math.log(self.max_aspect))
        self.exact_count = bool(exact_count)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(input_size=({self.height}, {self.width}), '
                f'num_masking_patches={self.num_masking_patches}, min_num_patches={self.min_num_patches}, '
                f'max_num_patches={self.max_num_patches}, min_aspect={self.min_aspect:.4g}, '
                f'max_aspect={self.max_aspect:.4g}, exact_count={self.exact_count})')

    def _place_block(self, mask: np.ndarray, budget: int, rng: np.random.Generator) -> MaskBlock | None:
        for _ in range(NUM_ATTEMPTS_PER_BLOCK):
            target_area = _uniform(rng, self.min_num_patches, budget)
            aspect_ratio = math.exp(_uniform(rng, *self.log_aspect_ratio))
            h = int(round(math.sqrt(target_area * aspect_ratio)))
            w = int(round(math.sqrt(target_area / aspect_ratio)))
            if w < self.width and h < self.height:
                top = int(rng.integers(0, self.height - h + 1))
                left = int(rng.integers(0, self.width - w + 1))
                window = mask[top:top + h, left:left + w]
                num_new = h * w - int(window.sum())
                if 0 < num_new <= budget:
                    window[...] = True
                    return MaskBlock(top, left, h, w, target_area, aspect_ratio, budget, num_new)
        return None

    def generate(self, rng: np.random.Generator) -> tuple[np.ndarray, list[MaskBlock]]:
        """The mask (bool ``(H, W)``) and its rectangles in drawing order."""
        mask = np.zeros((self.height, self.width), dtype=bool)
        blocks: list[MaskBlock] = []
        mask_count = 0
        while mask_count < self.num_masking_patches:
            budget = min(self.num_masking_patches - mask_count, self.max_num_patches)
            block = self._place_block(mask, budget, rng)
            if block is None:
                break
            blocks.append(block)
            mask_count += block.num_new
        if self.exact_count and mask_count < self.num_masking_patches:
            unmasked = np.flatnonzero(~mask)  # row-major, as unilm's (mask == 0).nonzero()
            fill = rng.choice(unmasked.size, self.num_masking_patches - mask_count, replace=False)
            mask.flat[unmasked[fill]] = True
        return mask, blocks

    def __call__(self, rng: np.random.Generator) -> np.ndarray:
        return self.generate(rng)[0]


def _grid_and_count(input_size: int | tuple[int, int], num_masking_patches: int,
                    mask_ratio: float | None) -> tuple[tuple[int, int], int]:
    """The (H, W) patch grid and the masked count: ``num_masking_patches`` or ``round(mask_ratio * H * W)``."""
    grid = (input_size, input_size) if isinstance(input_size, int) else tuple(int(s) for s in input_size)
    if mask_ratio is None:
        return grid, num_masking_patches
    if num_masking_patches != 75:
        raise ValueError(f'got both num_masking_patches={num_masking_patches} and mask_ratio={mask_ratio}; '
                         'give only one of them')
    if not 0 < mask_ratio < 1:
        raise ValueError(f'mask_ratio={mask_ratio} must be in (0, 1)')
    return grid, int(round(mask_ratio * grid[0] * grid[1]))


def _next_rng(private: np.random.Generator | None) -> np.random.Generator:
    """The private generator, or a fresh one seeded from NumPy's global RNG (seeded per dataloader worker)."""
    if private is not None:
        return private
    return np.random.default_rng(np.random.randint(0, 2**63 - 1, dtype=np.int64))


@TRANSFORMS.register_module()
class BEiTMaskGenerator(BaseTransform):
    """Writes BEiT's blockwise mask to ``results['mask']``: bool ``(H, W)``, True = masked.

    Args:
        input_size, num_masking_patches, min_num_patches, max_num_patches, min_aspect, max_aspect, exact_count:
            as ``BlockwiseMaskGenerator``'s; defaults are BEiT pretraining's.
        mask_ratio: instead of a count, mask ``round(mask_ratio * H * W)`` patches.
        seed: None = NumPy's global RNG; an int = a private generator seeded once.
    """

    def __init__(self,
                 input_size: int | tuple[int, int] = 14,
                 num_masking_patches: int = 75,
                 min_num_patches: int = 16,
                 max_num_patches: int | None = None,
                 min_aspect: float = 0.3,
                 max_aspect: float | None = None,
                 mask_ratio: float | None = None,
                 exact_count: bool = False,
                 seed: int | None = None) -> None:
        grid, num_masking_patches = _grid_and_count(input_size, num_masking_patches, mask_ratio)
        self.generator = BlockwiseMaskGenerator(
            input_size=grid,
            num_masking_patches=num_masking_patches,
            min_num_patches=min_num_patches,
            max_num_patches=max_num_patches,
            min_aspect=min_aspect,
            max_aspect=max_aspect,
            exact_count=exact_count)
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(seed)


    def transform(self, results: dict) -> dict:
        results['mask'] = self.generator(_next_rng(self._rng))
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(generator={self.generator!r}, seed={self.seed})'


@TRANSFORMS.register_module()
class RandomMaskGenerator(BaseTransform):
    """Writes a uniformly random mask of exactly ``num_masking_patches`` patches to ``results['mask']``.

    Args:
        input_size, num_masking_patches, mask_ratio, seed: as ``BEiTMaskGenerator``'s.
    """

    def __init__(self,
                 input_size: int | tuple[int, int] = 14,
                 num_masking_patches: int = 75,
                 mask_ratio: float | None = None,
                 seed: int | None = None) -> None:
        grid, num_masking_patches = _grid_and_count(input_size, num_masking_patches, mask_ratio)
        if not 0 < num_masking_patches <= grid[0] * grid[1]:
            raise ValueError(f'num_masking_patches={num_masking_patches} must be in [1, {grid[0] * grid[1]}] for a '
                             f'{grid[0]}x{grid[1]} grid')
        self.grid = grid
        self.num_masking_patches = num_masking_patches
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(seed)


    def transform(self, results: dict) -> dict:
        n = self.grid[0] * self.grid[1]
        mask = np.zeros(n, dtype=bool)
        mask[_next_rng(self._rng).choice(n, self.num_masking_patches, replace=False)] = True
        results['mask'] = mask.reshape(self.grid)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(input_size={self.grid}, num_masking_patches={self.num_masking_patches}, '
                f'seed={self.seed})')
