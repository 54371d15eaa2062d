#!/usr/bin/env bash
# GPU report: correctness checks and the end-to-end benchmarks on a CUDA machine, as one Markdown document.
#
#   bash tools/analysis/gpu_report.sh [--dry-run] [--out report.md [--overwrite]]
#
# On a CUDA machine (about 6-8 minutes on one H100):
#   1. attention kernels: SDPA (memory-efficient backend, 8-aligned bias) vs eager in fp32 (1e-5 / 1e-4 absolute) and
#      in the --amp dtype (2e-2 relative), forward and gradients, at N=197 and N=1601, plus their timings
#      (tools/analysis/benchmark_attention.py --check);
#   2. fp32 parity tests on CUDA: tests/test_attention_paths.py with BEIT_MM_TEST_DEVICE=cuda;
#   3. tools/analysis/benchmark.py parts (a)-(e) in fp32 and with --amp.
# Without CUDA, or with --dry-run, it runs step 1 on CPU at a tiny size (a smoke test of the same code) and prints
# the commands of steps 2-3 instead of running them; CI runs this mode (tests/test_gpu_report.py).
# Needs: the beit_mm environment (PYTHON=path/to/python, default `python`), run from anywhere.
# --out is checked before anything runs (beit_mm.fileio.outputs.check_output: an existing file needs --overwrite; a
# link or a path in a dataset root is refused) and written through a temporary file and a rename.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-python}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
DRY=0
OUT=""
OVERWRITE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --overwrite) OVERWRITE=1; shift ;;
    *) echo "unknown argument $1; usage: gpu_report.sh [--dry-run] [--out FILE [--overwrite]]" >&2; exit 2 ;;
  esac
done
if [[ -n "$OUT" ]]; then
  "$PYTHON" -c 'import sys
from beit_mm.fileio.outputs import OutputError, check_output
try:
    check_output(sys.argv[1], sys.argv[2] == "1")
except OutputError as error:
    sys.exit(f"gpu_report: {error}")' "$OUT" "$OVERWRITE"
fi
if [[ $DRY -eq 0 ]] && ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_report: no CUDA device visible to torch; running the dry mode (pass --dry-run to ask for it)" >&2
  DRY=1
fi

report() {
  echo "# beit_mm GPU report"
  echo
  "$PYTHON" - <<'EOF'
import platform, torch
dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA device (dry run on CPU)'
print(f'{dev}; torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, '
      f'Python {platform.python_version()}')
EOF
  echo
  echo "## 1. Attention kernels: SDPA vs eager"
  echo
  if [[ $DRY -eq 1 ]]; then
    "$PYTHON" "$ROOT/tools/analysis/benchmark_attention.py" --device cpu --check --tokens 17 --batch 2 \
      --embed-dims 32 --heads 2 --iters 1 --rounds 1
  else
    "$PYTHON" "$ROOT/tools/analysis/benchmark_attention.py" --device cuda --check --tokens 197 1601 --batch 32 4
  fi
  echo
  echo "## 2. fp32 parity tests on CUDA"
  echo
  local tests=(-m pytest "$ROOT/tests/test_attention_paths.py" -q -p no:cacheprovider)
  if [[ $DRY -eq 1 ]]; then
    echo "dry run, not run: BEIT_MM_TEST_DEVICE=cuda $PYTHON ${tests[*]}"
  else
    echo '```'
    BEIT_MM_TEST_DEVICE=cuda "$PYTHON" "${tests[@]}" 2>&1 | tail -n 3
    echo '```'
  fi
  echo
  echo "## 3. End-to-end benchmarks"
  local bench=("$ROOT/tools/analysis/benchmark.py" --device cuda --parts mim mim2 finetune seg512 seg640 slide640
               --iters 5 --warmup 2 --rounds 3)
  for amp in "" "--amp"; do
    echo
    if [[ $DRY -eq 1 ]]; then
      echo "dry run, not run: $PYTHON ${bench[*]} $amp"
    else
      "$PYTHON" "${bench[@]}" $amp 2>/dev/null
    fi
  done
}

if [[ -n "$OUT" ]]; then
  mkdir -p "$(dirname "$OUT")"
  tmp="$(dirname "$OUT")/.$(basename "$OUT").$$.part"
  report | tee "$tmp"
  mv -f "$tmp" "$OUT"
else
  report
fi
