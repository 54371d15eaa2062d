"""Process groups of CPU runs launched by torchrun (:mod:`beit_mm.engine.launch`)."""
import os
import subprocess
import sys

from ..conftest import ROOT, free_port

CYCLES = 3
SCRIPT = f'''
import torch
import torch.distributed as dist

from beit_mm.engine.launch import destroy_process_group, init_cpu_process_group

for cycle in range({CYCLES}):
    init_cpu_process_group('pytorch', dict(backend='gloo', timeout=60))
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print(f'rank {{dist.get_rank()}} cycle {{cycle}} sum {{total.item():g}}', flush=True)
    destroy_process_group()
'''


def test_a_new_process_group_after_destroy_in_one_launch(tmp_path):
    """train() and run_test() each create the process group and destroy it at their end; in one torchrun launch the
    next one creates it again. 3 create -> all_reduce -> destroy cycles on 2 gloo processes all sum 1 + 2 (torch's
    default keys in torchrun's store made the second group connect to the first one's gloo addresses: refused,
    or a wait until the timeout)."""
    script = tmp_path / 'cycles.py'
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), OMP_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_port',
                           str(free_port()), str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    for rank in (0, 1):
        for cycle in range(CYCLES):
            assert f'rank {rank} cycle {cycle} sum 3' in output, output[-4000:]
