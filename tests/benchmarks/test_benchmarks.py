"""``beit_mm.benchmarks``: what a GPU run relies on, checked on CPU with a toy part: an out-of-memory step halves the
batch and the row says so, the rows carry batch, TFLOP/s and MFU (a MIM row also with its tokenizer), a compiled row
its ratio to eager, a skipped peer its reason."""
import pytest
import torch
from torch import nn

from beit_mm.benchmarks.measure import Part, Timing, run_part
from beit_mm.benchmarks.report import flops_cells, markdown
from beit_mm.benchmarks.mfu import device_peak


class Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(4, 4)


def toy_part(max_batch: int, skipped: dict | None = None) -> Part:
    """A part whose step runs out of memory above ``max_batch`` images, as a CUDA step would."""
    def make_inputs(batch: int, device: torch.device) -> dict:
        return dict(x=torch.randn(batch, 4, device=device))

    def step(model, ours, inputs):
        if inputs['x'].shape[0] > max_batch:
            raise torch.OutOfMemoryError('CUDA out of memory (toy)')
        return model.backbone(inputs['x']).square().mean()

    return Part('(t) toy', {'beit_mm': Toy, 'peer': Toy}, make_inputs, step, flops_shape=None,
                skipped=skipped or {})


def test_out_of_memory_halves_the_batch_and_the_row_says_so():
    timing = Timing(iters=1, warmup=0, rounds=1, split=False)
    res = run_part(toy_part(max_batch=2), timing, torch.device('cpu'), None, batch=8)
    assert res['batch'] == 2 and res['batch_note'] == ' (8 ran out of memory)'
    assert set(res['rows']) == {('beit_mm', 'eager'), ('peer', 'eager')}
    table = markdown([(toy_part(2, {'timm': 'timm is not installed'}), res)], 'header', None)
    rows = [ln for ln in table.splitlines() if ln.startswith('| (t) toy |')]
    assert rows[0].split(' | ')[3] == '2 (8 ran out of memory)'
    assert '| timm | skipped: timm is not installed | 2 (8 ran out of memory) |' in rows[-1]
    header = table.splitlines()[2]
    assert '| batch |' in header and header.endswith('| TFLOP/s | MFU |')


def test_out_of_memory_at_batch_one_is_raised():
    with pytest.raises(torch.OutOfMemoryError):
        run_part(toy_part(max_batch=0), Timing(iters=1, warmup=0, rounds=1, split=False), torch.device('cpu'),
                 None, batch=4)


def test_compiled_rows_are_beit_mm_models_only_unless_asked():
    timing = Timing(iters=1, warmup=0, rounds=1, split=False)
    res = run_part(toy_part(max_batch=8), timing, torch.device('cpu'), None, batch=2, modes=('eager', 'compiled'))
    assert set(res['rows']) == {('beit_mm', 'eager'), ('beit_mm', 'compiled'), ('peer', 'eager')}
    table = markdown([(toy_part(8), res)], 'header', None)
    compiled = next(ln for ln in table.splitlines() if '| beit_mm | compiled (' in ln)
    assert 'vs eager, warm-up' in compiled and 'vs peer eager' in compiled


def test_flops_cells_give_tflops_and_mfu_with_and_without_the_tokenizer():
    """A MIM step of 18 G multiply-adds of trained model + 26 G of frozen tokenizer per image at 1000 img/s on an
    H100 SXM in bf16: 2 * 3 * 18e9 * 1000 = 108 TFLOP/s (10.9% of 989); with the tokenizer's forward once,
    2 * (54 + 26) e12 = 160 TFLOP/s (16.2%)."""
    peak = device_peak('NVIDIA H100 80GB HBM3', 'bf16')
    gflop, tflops, mfu = flops_cells(dict(macs=44e9, frozen_macs=26e9), True, 1000.0, peak)
    assert gflop == '36 + 52 tokenizer'
    assert tflops == '108 (160 with tokenizer)'
    assert mfu == '10.9% (16.2% with tokenizer)'
    assert flops_cells(dict(macs=17.58e9, frozen_macs=0), True, 10.0, None) == ('35.16', '1.05', '-')
    assert flops_cells(None, True, 10.0, peak) == ('-', '-', '-')
