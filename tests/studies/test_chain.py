"""tools/run_chain.sh end to end on tiny generated data, 2 iterations per stage (dVAE -> MIM; pixel MIM -> VQ-KD -> MIM;
segmentation from each and from scratch): every stage's line, fine-tuning loaded the MIM backbone (0 missing keys),
scratch did not, MIM used the exported dVAE encoder."""
import os
import re
import subprocess
import sys

import torch

from ..conftest import ROOT


def test_chain_runs_end_to_end(tmp_path):
    work = tmp_path / 'work'
    env = dict(os.environ, CHAIN_PYTHON=sys.executable, CHAIN_WORK_DIR=str(work), CHAIN_DATA_DIR=str(tmp_path / 'data'),
               CHAIN_NUM_TRAIN='8', CHAIN_NUM_VAL='4', CHAIN_NUM_UNLABELED='16', CHAIN_DVAE_ITERS='2',
               CHAIN_MIM_ITERS='2', CHAIN_VQKD_ITERS='2', CHAIN_SEG_ITERS='2', CHAIN_WORKERS='0',
               CHAIN_HEADS='upernet')
    proc = subprocess.run(['bash', 'tools/run_chain.sh'], cwd=ROOT, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    num = r'-?\d+(\.\d+)?'
    assert re.search(rf'\[chain\] dvae: iters=2 usage={num} perplexity={num} psnr={num} \(held-out; mean-colour '
                     rf'psnr {num}\)', out), out
    assert re.search(rf'\[chain\] vqkd: iters=2 usage={num} perplexity={num} teacher_cosine={num} \(held-out; '
                     r'teacher = pixels-blockwise\)', out), out
    for arm in ('tokens-blockwise', 'vqkd-blockwise'):
        assert re.search(rf'\[chain\] mim {arm}: iters=2 loss={num} mim_acc={num} \(most frequent token {num}\)',
                         out), out
        for head in ('upernet', ):
            found = re.search(rf'\[chain\] seg \({head} decoder\) {arm}: iters=2 mIoU=({num}) from MIM vs ({num}) '
                              rf'from scratch, ([+-]\d+\.\d+) \(majority class {num}\)', out)
            assert found, (arm, head, out)
            assert abs(float(found[1]) - float(found[3]) - float(found[5])) < 0.011  # the printed difference
    for head in ('upernet', ):
        for arm in ('tokens-blockwise', 'vqkd-blockwise'):
            ckpt = work / 'mim' / f'{arm}_seed0' / 'iter_2.pth'
            log = (work / 'finetune' / head / f'{arm}_seed0' / 'train.log').read_text()
            assert re.search(rf'loaded \d+ backbone weights from {re.escape(str(ckpt))} \(0 missing', log), (head, arm)
        assert 'backbone weights from' not in (work / 'finetune' / head / 'scratch_seed0' / 'train.log').read_text()
    mim_ckpt = work / 'mim' / 'tokens-blockwise_seed0' / 'iter_2.pth'
    tokenizer = torch.load(work / 'tokenizer.pth', map_location='cpu', weights_only=True)['state_dict']
    mim = torch.load(mim_ckpt, map_location='cpu', weights_only=True)['state_dict']
    assert torch.equal(mim['target_generator.blocks.input.weight'], tokenizer['blocks.input.weight'])
