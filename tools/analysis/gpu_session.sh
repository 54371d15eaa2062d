#!/usr/bin/env bash
# A GPU session in one command: set up the carried wheels (gpu_setup.sh), then the GPU report in time-boxed pieces,
# each written to its own file in OUT_DIR as it runs, with its log (stderr: each round's img/s) beside it (a piece
# that fails or runs out of time says so and the next one runs).
#
#   bash tools/analysis/gpu_session.sh OUT_DIR [--dry-run] [--piece 1|2|3|4] [--wheels DIR]
#
# Piece 1 (about 8 minutes on an H200, set-up ~160 s included): the attention kernels and the CUDA attention tests,
# then the bf16 ImageNet fine-tuning step, eager and compiled, next to timm and mmpretrain compiled too, with the
# device time by kernel category. Piece 2 (about 5 minutes): the bf16 BEiT v1 MIM step the same way next to
# mmpretrain, and UPerNet 512 eager. Piece 3 (about 4 minutes): the ImageNet recipes' input side on the GPU machine
# (benchmark_data.py --device cuda): each pipeline's data preprocessor per batch on the GPU at the recipe's batch,
# nvjpeg's batched decode on its own, and MMEngine's DataLoader with 13 workers (a node's per GPU) through the
# preprocessor. Piece 4 (about 8 minutes on an H100, set-up included): one bf16 training step (two, the second
# timed alone) and one validation of one full-size config of every model family (family_steps.py), each family in
# its own process with 60 s, the whole within 330 s; a family that fails or runs out of time prints FAILED and the
# next one runs. --dry-run runs them on CPU at a tiny size (what CI checks).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
OUT_DIR=""
DRY=0
PIECE=1
WHEELS="$ROOT/.whl"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --piece) PIECE="$2"; shift 2 ;;
    --wheels) WHEELS="$2"; shift 2 ;;
    -*) echo "gpu_session: unknown option $1" >&2; exit 2 ;;
    *) OUT_DIR="$1"; shift ;;
  esac
done
usage="usage: gpu_session.sh OUT_DIR [--dry-run] [--piece 1|2|3|4] [--wheels DIR]"
[[ -n "$OUT_DIR" ]] || { echo "$usage" >&2; exit 2; }
mkdir -p "$OUT_DIR"
dry=()
[[ $DRY -eq 1 ]] && dry=(--dry-run)
report() { PYTHON="$PYTHON" bash "$ROOT/tools/analysis/gpu_report.sh" "${dry[@]}" --overwrite "$@"; }
start=$SECONDS
PYTHON="$PYTHON" bash "$ROOT/tools/analysis/gpu_setup.sh" "${dry[@]}" "$WHEELS" > "$OUT_DIR/0-setup.txt" 2>&1 \
  || { tail -n 20 "$OUT_DIR/0-setup.txt"; exit 1; }
tail -n 1 "$OUT_DIR/0-setup.txt"
case "$PIECE" in
  1)
    report --steps attention,tests --out "$OUT_DIR/1-attention.md" --step-timeout 120 > "$OUT_DIR/1-attention.log" 2>&1
    echo "attention and tests: $((SECONDS - start)) s"
    report --steps bench --dtypes bf16 --parts finetune --profile 8 --compile-peers --iters 20 \
      --step-timeout 300 --out "$OUT_DIR/2-finetune.md" > "$OUT_DIR/2-finetune.log" 2>&1
    ;;
  2)
    report --steps bench --dtypes bf16 --parts mim --profile 8 --compile-peers --iters 10 \
      --step-timeout 200 --out "$OUT_DIR/3-mim.md" > "$OUT_DIR/3-mim.log" 2>&1
    report --steps bench --dtypes bf16 --parts seg512 --profile 8 --no-compile --iters 10 \
      --step-timeout 100 --out "$OUT_DIR/4-seg512.md" > "$OUT_DIR/4-seg512.log" 2>&1
    ;;
  3)
    if [[ $DRY -eq 1 ]]; then
      data=(--images 4 --imagenet-size 48 64 --recipes "ImageNet fine-tuning" "BEiT v1" --device cpu
            --device-batch 2 --device-batches 1 --loader-workers 1)
    else
      data=(--images 96 --recipes "ImageNet fine-tuning" "CvT-13" "BEiT v1" "BEiT v2" --device cuda
            --device-batches 2 --loader-workers 13)
    fi
    timeout 480 env PYTHONPATH="$ROOT" "$PYTHON" "$ROOT/tools/analysis/benchmark_data.py" "${data[@]}" \
      --work-dir "${TMPDIR:-/tmp}/beit_mm_data_bench" --out "$OUT_DIR/5-data.md" --overwrite \
      > "$OUT_DIR/5-data.log" 2>&1 || echo "benchmark_data failed or ran out of time: $OUT_DIR/5-data.log"
    ;;
  4)
    timeout 360 env PYTHONPATH="$ROOT" "$PYTHON" "$ROOT/tools/analysis/family_steps.py" "${dry[@]}" --timeout 60 \
      --budget 330 --work-dir "${TMPDIR:-/tmp}/beit_mm_family_steps" --out "$OUT_DIR/6-families.md" --overwrite \
      > "$OUT_DIR/6-families.log" 2>&1 \
      || echo "family_steps: a family failed or it ran out of time: $OUT_DIR/6-families.log"
    grep -E '^[^|#].*: (ok|FAILED)' "$OUT_DIR/6-families.log" || true
    ;;
  *) echo "gpu_session: --piece is 1, 2, 3 or 4" >&2; exit 2 ;;
esac
echo "gpu_session piece $PIECE: $((SECONDS - start)) s; files in $OUT_DIR"
