#!/usr/bin/env bash
# GPU report: correctness checks and the end-to-end benchmarks on a CUDA machine, as one Markdown document.
#
#   bash tools/analysis/gpu_report.sh [--dry-run] [--out report.md [--overwrite]] [--steps attention,tests,bench]
#        [--dtypes fp32,bf16] [--parts "mim mim2 finetune seg512 seg640 eomt512 slide640"] [--no-compile]
#        [--iters N] [--profile N] [--compile-peers] [--attn-impls "sdpa flex"] [--step-timeout SECONDS]
#
# On a CUDA machine:
#   1. attention kernels: SDPA (memory-efficient backend, 8-aligned bias), cuDNN attention and FlexAttention (the
#      bias read from the table in score_mod) vs eager in fp32 (1e-5 / 1e-4 absolute) and in the --amp dtype (2e-2
#      relative), forward and gradients, at N=197 and N=1601, plus their timings: the measurement that picks
#      attn_impl='auto' on CUDA (tools/analysis/benchmark_attention.py --check);
#   2. fp32 parity tests on CUDA: tests/models/test_attention_paths.py with BEIT_MM_TEST_DEVICE=cuda;
#   3. tools/analysis/benchmark.py --parts PARTS at the recipes' batch per GPU (an out-of-memory step halves it),
#      eager and compiled (--compile), in fp32 and with --amp (bf16): img/s, peak memory, ratios against the peers,
#      model GFLOP per image, TFLOP/s and MFU against the GPU's dense peak (docs/performance.md#mfu).
# Each step (and each dtype of step 3) runs on its own under `timeout --step-timeout` (default 540 s): one that fails
# or runs out of time leaves a line saying so and the report goes on. --profile N adds the device time of one step
# of every row by kernel category (matmul, attention, elementwise, optimizer, other); --compile-peers compiles the
# peers too (compiled vs compiled); --attn-impls gives one beit_mm row per attention kernel.
# --steps, --dtypes and --parts pick a subset, so a session with a 10-minute limit per command can run the report in
# pieces (docs/performance.md has the commands and their estimated minutes). Without --out the report goes to
# docs/studies/gpu-report-<gpu>.md (<gpu>: h100, h200, a100, ... from the device name; --overwrite to replace it).
# Without CUDA, or with --dry-run, it runs step 1 on CPU at a tiny size and step 3 on CPU for the tiny EoMT demo
# (a smoke test of the same code, with the batch and MFU columns), and prints the commands of steps 2-3 instead of
# running them; CI runs this mode (tests/tools/test_gpu_report.py).
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
STEPS="attention,tests,bench"
DTYPES="fp32,bf16"
PARTS="mim mim2 finetune seg512 seg640 eomt512 slide640"
COMPILE="--compile"
ITERS=()
BENCH_EXTRA=()
STEP_TIMEOUT=540
usage="usage: gpu_report.sh [--dry-run] [--out FILE [--overwrite]] [--steps attention,tests,bench] [--dtypes fp32,bf16] [--parts \"P ...\"] [--no-compile] [--iters N] [--profile N] [--compile-peers] [--attn-impls \"I ...\"] [--step-timeout S]"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --overwrite) OVERWRITE=1; shift ;;
    --steps) STEPS="$2"; shift 2 ;;
    --dtypes) DTYPES="$2"; shift 2 ;;
    --parts) PARTS="$2"; shift 2 ;;
    --no-compile) COMPILE=""; shift ;;
    --iters) ITERS=(--iters "$2"); shift 2 ;;
    --profile) BENCH_EXTRA+=(--profile "$2"); shift 2 ;;
    --compile-peers) BENCH_EXTRA+=(--compile-peers); shift ;;
    --attn-impls) read -r -a impls <<< "$2"; BENCH_EXTRA+=(--attn-impls "${impls[@]}"); shift 2 ;;
    --step-timeout) STEP_TIMEOUT="$2"; shift 2 ;;
    *) echo "unknown argument $1; $usage" >&2; exit 2 ;;
  esac
done
step() { [[ ",$STEPS," == *",$1,"* ]]; }
if [[ $DRY -eq 0 ]] && ! "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_report: no CUDA device visible to torch; running the dry mode (pass --dry-run to ask for it)" >&2
  DRY=1
fi
if [[ -z "$OUT" && $DRY -eq 0 ]]; then  # docs/studies/gpu-report-<gpu>.md, <gpu> from the device name
  OUT="$ROOT/docs/studies/gpu-report-$("$PYTHON" -c 'import re, torch
name = torch.cuda.get_device_name(0)
m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name)
print(m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-"))').md"
fi
if [[ -n "$OUT" ]]; then
  "$PYTHON" -c 'import sys
from beit_mm.fileio.outputs import OutputError, check_output
try:
    check_output(sys.argv[1], sys.argv[2] == "1")
except OutputError as error:
    sys.exit(f"gpu_report: {error}")' "$OUT" "$OVERWRITE"
fi

# run_step NAME COMMAND...: the command under the step time-out; a failure or time-out is a line, not the end.
run_step() {
  local name="$1"; shift
  local rc=0
  timeout --signal=TERM --kill-after=20 "$STEP_TIMEOUT" "$@" || rc=$?
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo; echo "**$name: stopped after the ${STEP_TIMEOUT} s step time-out (exit $rc); the report goes on.**"
  elif [[ $rc -ne 0 ]]; then
    echo; echo "**$name: failed (exit $rc); the report goes on.**"
  fi
  return 0
}

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
  if step attention; then
    echo "## 1. Attention kernels against eager: SDPA, FlexAttention (and cuDNN attention on CUDA)"
    echo
    if [[ $DRY -eq 1 ]]; then
      run_step "attention kernels" "$PYTHON" "$ROOT/tools/analysis/benchmark_attention.py" --device cpu --check \
        --tokens 17 --batch 2 --embed-dims 32 --heads 2 --iters 1 --rounds 1
    else
      run_step "attention kernels" "$PYTHON" "$ROOT/tools/analysis/benchmark_attention.py" --device cuda --check \
        --tokens 197 1601 --batch 128 8
    fi
    echo
  fi
  if step tests; then
    echo "## 2. fp32 parity tests on CUDA"
    echo
    local tests=(-m pytest "$ROOT/tests/models/test_attention_paths.py" -q -p no:cacheprovider)
    if [[ $DRY -eq 1 ]]; then
      echo "dry run, not run: BEIT_MM_TEST_DEVICE=cuda $PYTHON ${tests[*]}"
    else
      echo '```'
      BEIT_MM_TEST_DEVICE=cuda run_step "CUDA tests" "$PYTHON" "${tests[@]}" 2>&1 | tail -n 4
      echo '```'
    fi
    echo
  fi
  if step bench; then
    echo "## 3. End-to-end benchmarks at the recipes' batch: throughput, TFLOP/s, MFU"
    # shellcheck disable=SC2206
    local bench=("$ROOT/tools/analysis/benchmark.py" --device cuda --parts $PARTS $COMPILE "${ITERS[@]}"
                 "${BENCH_EXTRA[@]}")
    local dtype
    for dtype in ${DTYPES//,/ }; do
      local amp=""
      [[ "$dtype" == bf16 ]] && amp="--amp"
      echo
      if [[ $DRY -eq 1 ]]; then
        echo "dry run, not run: $PYTHON ${bench[*]} $amp"
      else
        run_step "benchmarks ($dtype)" "$PYTHON" "${bench[@]}" $amp
      fi
    done
    if [[ $DRY -eq 1 ]]; then  # the same code on CPU at a tiny size: the columns a GPU run prints
      echo
      echo "Dry run on CPU (tiny EoMT demo, one step; TFLOP/s without MFU on a CPU):"
      echo
      run_step "benchmark dry run" "$PYTHON" "$ROOT/tools/analysis/benchmark.py" --device cpu --parts eomt-demo \
        --iters 1 --warmup 0 --rounds 1 --no-split "${BENCH_EXTRA[@]}"
    fi
  fi
}

if [[ -n "$OUT" ]]; then
  mkdir -p "$(dirname "$OUT")"
  tmp="$(dirname "$OUT")/.$(basename "$OUT").$$.part"
  report | tee "$tmp"
  mv -f "$tmp" "$OUT"
else
  report
fi
