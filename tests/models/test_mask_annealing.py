"""EoMT's per-block mask-keeping probability and its application, against tue-mps/eomt @
7bd19ddd621c5c6adedcd260458a34783cd4a45f as its files state the rules:

- ``training/lightning_module.py:199-209``: 1 before ``start``, 0 from ``end``, else
  ``(1 - (t - start) / (end - start)) ** poly_power``; ``poly_power`` 0.9 (``mask_classification_semantic.py:33``).
- ``models/eomt.py:71-82``: if ``prob < 1``, ``torch.rand(B, num_q) > prob`` picks the queries whose query-to-patch
  row is masked.

The short run scales ``configs/dinov2/ade20k/semantic/eomt_large_512.yaml:13-14`` to ``U = 20``; the 5-block
structure is ``configs/dinov2/ade20k/panoptic/eomt_giant_640.yaml:13-14``."""
import pytest
import torch

from beit_mm.models.segmentors import anneal_attention_mask, mask_probabilities

POLY_POWER = 0.9  # training/mask_classification_semantic.py:33 (no official config overrides it)

# configs/dinov2/ade20k/semantic/eomt_large_512.yaml:13-14
ADE20K_L_STARTS = [6520, 13040, 19560, 26080]
ADE20K_L_ENDS = [13040, 19560, 26080, 32600]
# configs/dinov2/ade20k/panoptic/eomt_giant_640.yaml:13-14
ADE20K_G_STARTS = [6520, 11410, 16300, 21190, 26080]
ADE20K_G_ENDS = [13040, 17930, 22820, 27710, 32600]


def official_probability(start: int, current: int, final: int, power: float = POLY_POWER) -> float:
    """``training/lightning_module.py:202-209``, restated in Python floats."""
    if current < start:
        return 1.0
    if current >= final:
        return 0.0
    progress = (current - start) / (final - start)
    return (1.0 - progress) ** power


def scaled(steps: list[int], unit: int, official_unit: int = 6520) -> list[int]:
    """Official steps expressed in ``U = official_unit``, rescaled to ``U = unit`` (exact for these configs)."""
    out = [s * unit / official_unit for s in steps]
    assert all(x == int(x) for x in out), f'{steps} are not multiples of {official_unit / unit}'
    return [int(x) for x in out]


def test_short_run_structure_is_the_official_one():
    """The scaled schedules keep the official configs' structure (U = 6520 there, 20 here)."""
    assert ADE20K_L_STARTS == [6520 * k for k in (1, 2, 3, 4)]
    assert ADE20K_L_ENDS == [6520 * k for k in (2, 3, 4, 5)]
    assert ADE20K_G_STARTS == [round(6520 * k) for k in (1, 1.75, 2.5, 3.25, 4)]
    assert ADE20K_G_ENDS == [s + 6520 for s in ADE20K_G_STARTS]
    assert scaled(ADE20K_L_STARTS, 20) == [20, 40, 60, 80]
    assert scaled(ADE20K_G_STARTS, 20) == [20, 35, 50, 65, 80]


@pytest.mark.parametrize('starts,ends', [(ADE20K_L_STARTS, ADE20K_L_ENDS), (ADE20K_G_STARTS, ADE20K_G_ENDS)],
                         ids=['large-4-blocks', 'giant-5-blocks'])
def test_every_step_of_a_short_run_equals_the_official_rule(starts, ends):
    starts, ends = scaled(starts, 20), scaled(ends, 20)
    for step in range(0, 131):  # the run is 120 steps; 10 more past it
        got = mask_probabilities(step, starts, ends, POLY_POWER)
        expected = [official_probability(s, step, e) for s, e in zip(starts, ends)]
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-7), f'step {step}'


def test_boundaries_and_values_of_the_short_run():
    starts, ends = [20, 40, 60, 80], [40, 60, 80, 100]

    def probs(step: int) -> list[float]:
        return mask_probabilities(step, starts, ends, POLY_POWER)

    assert probs(0) == [1.0, 1.0, 1.0, 1.0]
    assert probs(19) == [1.0, 1.0, 1.0, 1.0]              # before the first start
    assert probs(20) == [1.0, 1.0, 1.0, 1.0]              # (1 - 0) ** 0.9 at the start itself
    assert probs(30)[0] == pytest.approx(0.5 ** 0.9, rel=1e-6)   # half-way: 0.5358867...
    assert probs(30)[0] == pytest.approx(0.5358867312681466, rel=1e-6)
    assert probs(39)[0] == pytest.approx(0.05 ** 0.9, rel=1e-6)  # last step before the end
    assert probs(40) == [0.0, 1.0, 1.0, 1.0]              # end of block 0 = start of block 1
    assert probs(70) == pytest.approx([0.0, 0.0, 0.5 ** 0.9, 1.0], rel=1e-6)
    assert probs(99)[3] == pytest.approx(0.05 ** 0.9, rel=1e-6)
    assert probs(100) == [0.0, 0.0, 0.0, 0.0]             # after the last end: no masks, at inference too
    assert probs(10 ** 6) == [0.0, 0.0, 0.0, 0.0]


def test_block_with_equal_start_and_end_steps_from_one_to_zero():
    """The official rule allows ``start == end`` (``current >= final`` is tested first): 1 before, 0 from it on."""
    for step in range(0, 61):
        assert mask_probabilities(step, [20, 50], [40, 50], POLY_POWER)[1] == official_probability(50, step, 50)
    assert mask_probabilities(49, [20, 50], [40, 50], POLY_POWER)[1] == 1.0
    assert mask_probabilities(50, [20, 50], [40, 50], POLY_POWER)[1] == 0.0


def test_blocks_anneal_one_after_another():
    """4 blocks (the ViT-L structure): at most one block between 0 and 1; earlier blocks never above later ones."""
    starts, ends = [20, 40, 60, 80], [40, 60, 80, 100]
    for step in range(0, 121):
        p = mask_probabilities(step, starts, ends, POLY_POWER)
        assert sum(0.0 < x < 1.0 for x in p) <= 1, f'step {step}: {p}'
        assert p == sorted(p), f'step {step}: {p}'


def test_first_block_annealed_from_step_zero():
    """DINOv3 configs (configs/dinov3/ade20k/semantic/eomt_large_512.yaml:13-14) start block 0 at step 0."""
    starts, ends = [0, 40, 60, 80], [10, 60, 80, 100]
    for step in range(0, 121):
        got = mask_probabilities(step, starts, ends, POLY_POWER)
        assert got == pytest.approx([official_probability(s, step, e) for s, e in zip(starts, ends)], rel=1e-6)
    assert mask_probabilities(0, starts, ends, POLY_POWER)[0] == 1.0
    assert mask_probabilities(10, starts, ends, POLY_POWER)[0] == 0.0


def test_full_scale_official_schedule():
    for step in list(range(0, 40000, 97)) + [6519, 6520, 6521, 13039, 13040, 32599, 32600]:
        got = mask_probabilities(step, ADE20K_L_STARTS, ADE20K_L_ENDS, POLY_POWER)
        expected = [official_probability(s, step, e) for s, e in zip(ADE20K_L_STARTS, ADE20K_L_ENDS)]
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-7), f'step {step}'


def test_schedule_errors_name_the_fix():
    with pytest.raises(ValueError, match='one start and one end per masked block'):
        mask_probabilities(0, [1, 2], [3], POLY_POWER)
    with pytest.raises(ValueError, match='block 1 ends'):
        mask_probabilities(0, [1, 5], [3, 4], POLY_POWER)


K, P, N, B = 5, 2, 6, 3
T = K + P + N


def some_mask(seed: int = 0) -> torch.Tensor:
    """(B, T, T) bool with False entries everywhere, so that any change outside the query-to-patch block shows."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand((B, T, T), generator=g) > 0.3


def official_mask(attn_mask: torch.Tensor, prob: float) -> torch.Tensor:
    """``models/eomt.py:72-82`` restated: drawn from the global RNG, applied to a copy."""
    attn_mask = attn_mask.clone()
    if prob < 1:
        random_queries = torch.rand(attn_mask.shape[0], K) > prob
        attn_mask[:, :K, K + P:][random_queries] = True
    return attn_mask


def test_prob_one_keeps_every_mask_and_draws_nothing():
    mask = some_mask()
    state = torch.get_rng_state()
    out = anneal_attention_mask(mask, 1.0, K, P)
    assert torch.equal(out, mask)
    assert torch.equal(torch.get_rng_state(), state), 'the official code draws nothing at p = 1 (eomt.py:73)'


def test_prob_zero_drops_every_query_mask_and_nothing_else():
    mask = some_mask()
    before = mask.clone()
    torch.manual_seed(0)
    out = anneal_attention_mask(mask, 0.0, K, P)
    assert torch.equal(mask, before), 'input modified'
    assert out[:, :K, K + P:].all()
    assert torch.equal(out[:, :, :K + P], mask[:, :, :K + P])   # query and prefix columns untouched
    assert torch.equal(out[:, K:, :], mask[:, K:, :])            # rows of prefix tokens and patches untouched


def test_no_masks_after_annealing():
    """Official layout (eomt.py:121-141): all True but the predicted query-to-patch block; p = 0 opens it."""
    mask = torch.ones(B, T, T, dtype=torch.bool)
    mask[:, :K, K + P:] = some_mask()[:, :K, K + P:]
    assert not mask.all()
    torch.manual_seed(1)
    for p in mask_probabilities(100, [20, 40, 60, 80], [40, 60, 80, 100], POLY_POWER):
        assert anneal_attention_mask(mask, p, K, P).all()


@pytest.mark.parametrize('prob', [0.3, 0.5, 0.8])
def test_intermediate_prob_keeps_the_queries_the_official_draw_keeps(prob):
    mask = some_mask()
    torch.manual_seed(123)
    out = anneal_attention_mask(mask, prob, K, P)
    torch.manual_seed(123)
    expected = official_mask(mask, prob)
    assert torch.equal(out, expected)
    # the draw is per (image, query): both kept and dropped queries occur, and a kept query keeps its row
    torch.manual_seed(123)
    drop = torch.rand(B, K) > prob
    assert drop.any() and (~drop).any()
    assert torch.equal(out[:, :K, K + P:][~drop], mask[:, :K, K + P:][~drop])
    assert out[:, :K, K + P:][drop].all()


def test_generator_gives_the_global_rng_stream():
    mask = some_mask()
    torch.manual_seed(7)
    expected = official_mask(mask, 0.5)
    out = anneal_attention_mask(mask, 0.5, K, P, generator=torch.Generator().manual_seed(7))
    assert torch.equal(out, expected)


def test_mask_errors_name_the_fix():
    with pytest.raises(ValueError, match='outside'):
        anneal_attention_mask(some_mask(), 1.5, K, P)
    with pytest.raises(ValueError, match=r'\(B, T, T\) bool'):
        anneal_attention_mask(some_mask()[:, None].expand(-1, 4, -1, -1), 0.5, K, P)
