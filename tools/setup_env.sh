#!/usr/bin/env bash
# Create (or reuse) the beit_mm virtual environment and print its path on the last line.
#
# The venv lives outside the checkout (default ~/.cache/beit_mm/venv-<hash>) so fresh clones on the same machine
# reuse it; the hash covers this file, so changing a pin builds a new one. mmcv 2.1.0 has no wheels for current torch:
# its ops are compiled from the PyPI source once (~10 min on 2 cores) and the wheel is kept in ~/.cache/beit_mm/wheels.
# `pip --isolated` ignores machine-level pip settings (a local torch+cpu wheel, version caps) so that torch and
# torchvision come as the matching pair from the index.
# Safety: a build holds the lock file "$venv.lock" (flock), so two builds at once wait for each other instead of
# deleting each other's venv; the venv is marked (.beit_mm_venv, holding "beit_mm venv <its path>") as soon as it is
# created, and an unfinished build is removed only when that mark holds exactly that line (a mark proves ownership by
# its content: anyone can create an empty file of that name). Any other existing path (BEIT_MM_VENV pointing at your own folder) is
# refused with exit code 2, untouched.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${BEIT_MM_CACHE:-$HOME/.cache/beit_mm}"
stamp_src="$(sha256sum < "$here/tools/setup_env.sh" | cut -c1-12)"
venv="${BEIT_MM_VENV:-$cache/venv-$stamp_src}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3

if [ -f "$venv/.beit_mm_ready" ]; then
  echo "$venv"
  exit 0
fi

log() { echo "[setup_env] $*" >&2; }
mkdir -p "$cache/wheels" "$(dirname "$venv")"
exec 9>"$venv.lock"
if ! flock -w "${BEIT_MM_SETUP_LOCK_TIMEOUT:-3600}" 9; then
  log "error: another build of $venv holds $venv.lock; wait for it to finish (nothing was changed)"
  exit 1
fi
if [ -f "$venv/.beit_mm_ready" ]; then  # built by the process we waited for
  echo "$venv"
  exit 0
fi
mark="beit_mm venv $venv"
if [ ! -L "$venv" ] && [ -f "$venv/.beit_mm_venv" ] && [ ! -L "$venv/.beit_mm_venv" ] \
   && [ "$(head -c 4096 "$venv/.beit_mm_venv")" = "$mark" ]; then
  log "removing the unfinished build in $venv"
  rm -rf "$venv"
elif [ -d "$venv" ] && [ -z "$(ls -A "$venv")" ]; then
  rmdir "$venv"
elif [ -e "$venv" ] || [ -L "$venv" ]; then
  log "error: $venv exists and is not a venv this script made (no .beit_mm_venv mark holding '$mark'); nothing was deleted."
  log "Fix: set BEIT_MM_VENV to a new path (or unset it for ~/.cache/beit_mm/venv-<hash>), or remove $venv yourself."
  exit 2
fi
log "creating $venv (first run: torch download + mmcv source build, ~15 min)"
"$python" -m venv "$venv"
echo "$mark" > "$venv/.beit_mm_venv"
pip() { "$venv/bin/python" -m pip --isolated --disable-pip-version-check "$@"; }
pip install -q --upgrade "pip<26" >&2

# torch/torchvision: an exactly matching pair (torchvision's compiled ops must match torch).
pip install -q "torch==2.13.0" "torchvision==0.28.0" "numpy<2" "opencv-python==4.10.0.84" >&2

# mmcv 2.1.0 with CPU ops, built from source once and cached as a wheel. CUDA ops are not needed by beit_mm;
# CUDA_VISIBLE_DEVICES='' keeps the build CPU-only (and fast) on GPU machines too. Its setup.py imports torch and
# pkg_resources (setuptools < 70): it builds in a throwaway venv holding only the build tools, which sees the venv's
# torch through a .pth line added after the tools are in, so the venv keeps the setuptools torch requires.
mmcv_whl="$(ls "$cache"/wheels/mmcv-2.1.0-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$mmcv_whl" ]; then
  log "building mmcv 2.1.0 with ops (about 10 minutes on 2 cores)"
  build_env="$(mktemp -d "${TMPDIR:-/tmp}/beit_mm_mmcv_build.XXXXXX")"
  "$python" -m venv "$build_env"
  build_pip() { "$build_env/bin/python" -m pip --isolated --disable-pip-version-check "$@"; }
  build_pip install -q "setuptools<70" wheel ninja >&2
  "$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
    > "$("$build_env/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/beit_mm_venv.pth"
  CUDA_VISIBLE_DEVICES='' MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS="${MAX_JOBS:-$(nproc)}" PATH="$build_env/bin:$PATH" \
    build_pip wheel -q --no-deps --no-build-isolation -w "$cache/wheels" "mmcv==2.1.0" >&2
  rm -rf "$build_env"
  mmcv_whl="$(ls "$cache"/wheels/mmcv-2.1.0-*.whl | head -n1)"
fi
pip install -q "$mmcv_whl" >&2

# The OpenMMLab stack (mmseg imports ftfy/regex without declaring them) and the test references. beit_mm itself is
# not installed into the shared venv: the run scripts put the checkout on PYTHONPATH.
# mmdet 3.3.0 (pure Python, accepts mmcv < 2.2.0) is what mmseg 1.2.2's Mask2FormerHead is built on.
# torchmetrics 1.9.0 (with lightning-utilities): beit_mm.PanopticQualityMetric counts PQ with its PanopticQuality
# (mmdet's CocoPanopticMetric needs panopticapi, not on PyPI).
pip install -q "mmengine==0.10.7" "mmsegmentation==1.2.2" "mmpretrain==1.2.0" "mmdet==3.3.0" ftfy regex \
  "transformers==4.46.3" "scipy<1.16" "pytest>=8" "matplotlib" "tensorboard" "torchmetrics==1.9.0" >&2
# pytest-xdist runs the suite on one worker per core (tools/run_tests.sh: -n 2 on the 2-core CI machine).
pip install -q "pytest-xdist==3.8.0" "execnet==2.1.2" >&2
# EoMT's parity reference, transformers' EomtForUniversalSegmentation (added in 4.56), in a folder of its own that only
# the reference subprocess of tests/test_eomt_hf.py puts first on sys.path: mmpretrain 1.2.0 (imported by mmseg via
# mmdet) fails to import beside transformers >= 4.49 (apply_chunking_to_forward left transformers.modeling_utils), so
# the environment itself keeps 4.46.3. tokenizers 0.22 is what 4.57 checks for at import.
pip install -q --no-deps --target "$venv/reference/transformers-4.57.6" "transformers==4.57.6" "tokenizers==0.22.1" >&2
# Export and interchange (tools/export.py, convert_checkpoint.py --to timm) and their references in the tests.
pip install -q "numpy<2" "timm==1.0.31" "onnx==1.23.2" "onnxruntime==1.32.0" "onnxscript==0.7.2" >&2
# scikit-learn ships the UCI handwritten digits that the MIM study's second dataset is drawn from (offline).
pip install -q "numpy<2" "scikit-learn==1.6.1" >&2
# dall-e declares torchvision, mypy and pytest but imports only torch, numpy, attrs, requests, blobfile: installed
# without its dependencies (its torchvision requirement is unpinned) and last, with mypy beside it so that
# `pip check` is clean.
pip install -q attrs requests blobfile "mypy==1.13.0" >&2
pip install -q --no-deps "dall-e==0.1" >&2
pip check >&2
"$venv/bin/python" -c "import xdist, mmcv.ops, mmseg, mmseg.models, mmdet, mmpretrain, transformers, dall_e, timm, onnxruntime, onnxscript, sklearn, torchmetrics" >&2
PYTHONPATH="$venv/reference/transformers-4.57.6" "$venv/bin/python" -c "from transformers import EomtForUniversalSegmentation" >&2
touch "$venv/.beit_mm_ready"
echo "$venv"
