#!/usr/bin/env bash
# Install beit_mm's stack into a lent GPU machine's own Python from a carried folder of wheels (no network there).
#
#   bash tools/analysis/gpu_setup.sh [--dry-run] [WHEEL_DIR]      (default WHEEL_DIR: .whl in the checkout)
#
# The machine's image brings Python 3.12, torch (with CUDA), torchvision, triton, numpy, opencv and pyyaml; this adds
# the pins of tools/setup_env.sh that it lacks, every wheel with --no-deps (pip must not look for the image's own
# packages in WHEEL_DIR), and builds mmcv 2.1.0 from its sdist with its CPU ops against the image's torch
# (CUDA hidden, all cores; ~90 s on 16 cores). Nothing is done when the stack already imports (a warm machine).
# WHEEL_DIR is filled on a machine with PyPI by the commands of docs/performance.md ("A GPU session").
# --dry-run prints the commands instead of running them.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${PYTHON:-python3}"
DRY=0
WHL="$ROOT/.whl"
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY=1 ;;
    -*) echo "gpu_setup: unknown option $arg; usage: gpu_setup.sh [--dry-run] [WHEEL_DIR]" >&2; exit 2 ;;
    *) WHL="$arg" ;;
  esac
done
WHEELS=(mmengine==0.10.7 mmsegmentation==1.2.2 mmpretrain==1.2.0 mmdet==3.3.0 transformers==4.46.3
        tokenizers==0.20.3 huggingface_hub==0.26.5 model-index==0.1.11 importlib_metadata==8.7.0 addict yapf
        platformdirs termcolor mat4py ordered-set prettytable wcwidth terminaltables pycocotools shapely ftfy regex
        DALL-E==0.1 timm==1.0.31 safetensors torchmetrics==1.9.0 lightning-utilities)
BUILD_TOOLS=(setuptools==69.5.1 wheel)
run() {
  if [[ $DRY -eq 1 ]]; then echo "dry run, not run: $*"; else "$@"; fi
}
if [[ $DRY -eq 0 ]]; then
  if "$PYTHON" -c 'import mmcv.ops, mmseg.models, mmpretrain.models, mmdet.models, dall_e, timm' 2>/dev/null; then
    echo "gpu_setup: the stack already imports; nothing to do"
    exit 0
  fi
  [[ -d "$WHL" ]] || { echo "gpu_setup: no wheel folder $WHL: carry it (docs/performance.md, A GPU session)" >&2; exit 2; }
fi
start=$SECONDS
install=("$PYTHON" -m pip install -q --no-index --find-links "$WHL" --no-deps --disable-pip-version-check)
run "${install[@]}" "${WHEELS[@]}"
build="$(mktemp -d)"  # setuptools < 70 for mmcv's setup.py (pkg_resources), on PYTHONPATH for that build only
run "${install[@]}" --target "$build" "${BUILD_TOOLS[@]}"
run env CUDA_VISIBLE_DEVICES='' MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS="$(nproc)" PYTHONPATH="$build" \
  "${install[@]}" --no-build-isolation mmcv==2.1.0
run env PYTHONPATH="$ROOT" "$PYTHON" -c "import mmcv.ops, mmseg.models, mmpretrain.models, mmdet.models, dall_e, timm, beit_mm"
echo "gpu_setup: done in $((SECONDS - start)) s"
