"""Relative position bias resampling vs an independent implementation of unilm's method with SciPy."""
import numpy as np
import pytest
import torch
from scipy.interpolate import RectBivariateSpline

from beit_mm.models.layers import relative_position_index, resize_rel_pos_bias_table
from beit_mm.models.layers.rel_pos_bias import cubic_spline_matrix


def unilm_resize_scipy(table: np.ndarray, src: int, dst: int) -> np.ndarray:
    """unilm ``semantic_segmentation/backbone/beit.py`` with ``interp2d(kind='cubic')`` replaced by its gridded-data
    equivalent ``RectBivariateSpline(kx=3, ky=3, s=0)`` (SciPy >= 1.14 has no interp2d)."""
    src_size, dst_size = 2 * src - 1, 2 * dst - 1
    extra = table[-3:]
    rel = table[:-3]

    def gp(a, r, n):
        return a * (1.0 - r ** n) / (1.0 - r)

    left, right = 1.01, 1.5
    while right - left > 1e-6:
        q = (left + right) / 2.0
        if gp(1, q, src_size // 2) > dst_size // 2:
            right = q
        else:
            left = q
    dis, cur = [], 1
    for i in range(src_size // 2):
        dis.append(cur)
        cur += q ** (i + 1)
    x = np.array([-d for d in reversed(dis)] + [0] + dis)
    t = dst_size // 2.0
    dx = np.arange(-t, t + 0.1, 1.0)
    cols = []
    for h in range(table.shape[1]):
        z = rel[:, h].reshape(src_size, src_size)
        f = RectBivariateSpline(x, x, z, kx=3, ky=3, s=0)  # z[i, j] at (y=x[i], x=x[j])
        cols.append(f(dx, dx).reshape(-1, 1))
    return np.concatenate([np.concatenate(cols, axis=1), extra], axis=0)


def test_resize_identity_at_equal_size():
    table = torch.randn(27 * 27 + 3, 4)
    assert torch.equal(resize_rel_pos_bias_table(table, (14, 14), (14, 14)), table)


@pytest.mark.parametrize('src,dst', [(14, 40), (14, 32), (7, 12)])
def test_resize_matches_unilm_scipy(src, dst):
    """224 -> 640 (14 -> 40 patches) and others: max|diff| <= 1e-4 against the SciPy implementation."""
    g = torch.Generator().manual_seed(0)
    table = torch.randn((2 * src - 1) ** 2 + 3, 3, generator=g, dtype=torch.float64)
    ours = resize_rel_pos_bias_table(table, (src, src), (dst, dst)).numpy()
    ref = unilm_resize_scipy(table.numpy(), src, dst)
    assert ours.shape == ((2 * dst - 1) ** 2 + 3, 3)
    assert np.abs(ours - ref).max() < 1e-4


def test_spline_reproduces_cubics_and_knots():
    """A not-a-knot cubic spline interpolates its knots and reproduces any cubic polynomial exactly."""
    x = torch.tensor([-5.0, -2.5, -1.0, 0.0, 1.0, 2.5, 5.0], dtype=torch.float64)
    t = torch.linspace(-6, 6, 25, dtype=torch.float64)
    w = cubic_spline_matrix(x, t)
    poly = lambda v: 0.3 * v ** 3 - v ** 2 + 2 * v - 1  # noqa: E731
    assert torch.allclose(w @ poly(x), poly(t), atol=1e-9)
    assert torch.allclose(cubic_spline_matrix(x, x), torch.eye(7, dtype=torch.float64), atol=1e-12)


def test_shrink_and_errors():
    table = torch.randn(79 * 79 + 3, 2)
    small = resize_rel_pos_bias_table(table, (40, 40), (14, 14))
    assert small.shape == (27 * 27 + 3, 2)
    assert torch.equal(small[-3:], table[-3:])
    with pytest.raises(ValueError, match='grid'):
        resize_rel_pos_bias_table(table, (14, 14), (40, 40))
    with pytest.raises(ValueError, match='one axis grows'):
        resize_rel_pos_bias_table(torch.randn(27 * 27 + 3, 2), (14, 14), (20, 10))


def test_relative_position_index_layout():
    """unilm's index: cls row/column point at the 3 extra rows; the center offset (0, 0) is row (Wh-1)(2Ww-1)+Ww-1."""
    idx = relative_position_index((3, 4))
    n = 3 * 4
    total = (2 * 3 - 1) * (2 * 4 - 1) + 3
    assert idx.shape == (n + 1, n + 1)
    assert idx[0, 0] == total - 1 and idx[0, 1] == total - 3 and idx[1, 0] == total - 2
    assert torch.all(idx[1:, 1:].diagonal() == 2 * (2 * 4 - 1) + 3)


def test_gather_index_is_cached_per_device_and_usable_by_autograd():
    """The gathered bias's index lives on the table's device once, and a first call under ``torch.inference_mode``
    leaves no inference tensor in the cache that a later training step could not save for backward."""
    from beit_mm.models.layers.rel_pos_bias import flat_relative_position_index, gather_relative_position_bias
    grid = (3, 5)  # a grid no other test gathers first
    table = torch.randn(num_rows := (2 * 3 - 1) * (2 * 5 - 1) + 3, 2)
    with torch.inference_mode():
        gather_relative_position_bias(table, grid, align=8)
    n, n_pad = 16, 16
    index = flat_relative_position_index(grid, n_pad, table.device)
    assert index is flat_relative_position_index(grid, n_pad, torch.device('cpu'))  # cached, not rebuilt
    expected = relative_position_index(grid)
    assert torch.equal(index.view(n, n_pad)[:, :n], expected) and not index.is_inference()
    trained = table.clone().requires_grad_(True)
    bias = gather_relative_position_bias(trained, grid, align=8)
    bias.sum().backward()  # raised "Inference tensors cannot be saved for backward" with an inference-mode cache
    counts = torch.bincount(expected.flatten(), minlength=num_rows).float()
    assert torch.equal(trained.grad, counts[:, None].expand(-1, 2))  # each row's gradient = how often it is read
