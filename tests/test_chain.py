"""tools/run_chain.sh end to end on tiny generated data (8 ADE20K-layout images, 2+1 per class ImageNet-layout), 2
iterations per stage (1 epoch of classification): demo data -> dVAE -> exported encoder -> MIM -> classification and
segmentation from the MIM checkpoint. Checks every stage's metric line, that the fine-tuning stages really loaded the
MIM backbone (0 missing keys) and that the MIM stage used the exported dVAE encoder (same weights in its checkpoint).
"""
import os
import re
import subprocess
import sys

import torch

from .conftest import ROOT


def test_chain_runs_end_to_end(tmp_path):
    env = dict(os.environ, CHAIN_PYTHON=sys.executable, CHAIN_WORK_DIR=str(tmp_path / 'work'),
               CHAIN_DATA_DIR=str(tmp_path / 'data'), CHAIN_NUM_TRAIN='8', CHAIN_NUM_VAL='2',
               CHAIN_PER_CLASS_TRAIN='2', CHAIN_PER_CLASS_VAL='1', CHAIN_DVAE_ITERS='2', CHAIN_MIM_ITERS='2',
               CHAIN_CLS_EPOCHS='1', CHAIN_SEG_ITERS='2', CHAIN_BATCH='4', CHAIN_WORKERS='0')
    proc = subprocess.run(['bash', 'tools/run_chain.sh'], cwd=ROOT, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    num = r'-?\d+(\.\d+)?'
    assert re.search(rf'\[chain\] dvae: iters=2 loss_rec={num} perplexity={num} codebook_usage={num}', out), out
    assert re.search(rf'\[chain\] mim: iters=2 loss={num} mim_acc={num}', out), out
    assert re.search(rf'\[chain\] cls: epochs=1 top1={num}', out), out
    assert re.search(rf'\[chain\] seg: iters=2 mIoU={num}', out), out
    work = tmp_path / 'work'
    for stage in ('cls', 'seg'):
        log = (work / f'{stage}.log').read_text()
        assert re.search(r'loaded \d+ backbone weights from .*mim/iter_2\.pth \(0 missing', log), stage
    tokenizer = torch.load(work / 'tokenizer.pth', map_location='cpu', weights_only=True)['state_dict']
    mim = torch.load(work / 'mim' / 'iter_2.pth', map_location='cpu', weights_only=True)['state_dict']
    assert torch.equal(mim['target_generator.blocks.input.weight'], tokenizer['blocks.input.weight'])
