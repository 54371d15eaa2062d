#!/usr/bin/env bash
# The test command: creates or reuses the environment (tools/setup_env.sh), prints the CPU (model, threads, native
# bf16 or not, ATen's kernel level), then runs pytest on tests/.
# Extra arguments go to pytest, e.g. `bash tools/run_tests.sh -k beit -x`; test paths among them replace the
# default `tests/` (`bash tools/run_tests.sh tests/models/test_beit.py -x` runs that file only). The tests run on
# pytest-xdist workers, one per core (see below); an `-n N` among the arguments overrides the script's.
#
# BEIT_MM_EMULATE_AVX2=1 runs the suite as an AVX2-only CPU would (the CI machines change CPU kind between sessions):
# ATen's, oneDNN's and MKL's kernels capped at AVX2, and beit_mm's bf16 decisions made as without AVX512-BF16/AMX.
# Use it once per change that touches kernels or tolerances on a machine that has AVX512 (docs/performance.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$here/tools/setup_env.sh" | tail -n1)"
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
if [ "${BEIT_MM_EMULATE_AVX2:-0}" != "0" ]; then
  export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
fi
# pytest-xdist workers: one per usable core, at most 4 (each holds up to ~3 GB); BEIT_MM_TEST_WORKERS=N chooses,
# BEIT_MM_TEST_WORKERS=1 runs everything in this one process (for pdb, -s, or reading one test's output in order).
# tests/conftest.py gives each worker torch threads = cores / workers (at most 2) and keeps the tests that share a
# module-scoped fixture on one worker (--dist loadscope, refined there).
cores="$(nproc)"
workers="${BEIT_MM_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}"
case "$workers" in ''|*[!0-9]*) echo "[run_tests] error: BEIT_MM_TEST_WORKERS=$workers is not a number of workers (1 = no xdist)" >&2; exit 2 ;; esac
if [ "$workers" -le 1 ]; then xdist=(-n 0); else xdist=(-n "$workers" --dist loadscope); fi
"$venv/bin/python" -c "import os, sys, torch; torch.set_num_threads(max(1, min(2, len(os.sched_getaffinity(0)) // int(sys.argv[1]))))
from beit_mm.engine.amp_optim_wrapper import describe_cpu; print('[run_tests] CPU:', describe_cpu(), '(per worker);', sys.argv[1], 'pytest worker(s)')" "$workers"
targets=(tests)
for arg in "$@"; do
  case "$arg" in tests/*|./tests/*) targets=(); break ;; esac
done
exec "$venv/bin/python" -m pytest "${targets[@]}" -q -p no:cacheprovider "${xdist[@]}" "$@"
