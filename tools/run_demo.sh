#!/usr/bin/env bash
# The main job on built-in demo data: creates or reuses the environment, generates the ADE20K-layout demo set if
# missing, trains a tiny BEiT + UPerNet on CPU (or GPU), evaluates the LAST checkpoint with tools/test.py on the
# validation split, and prints that mIoU (no checkpoint is picked on the split it reports).
# Checkpoints, logs and prediction overlays land in work_dirs/<config name>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$here/tools/setup_env.sh" | tail -n1)"
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
py="$venv/bin/python"
config="${CONFIG:-configs/demo/beit-tiny-p8_upernet_1xb8-1k_ade20k-demo-64x64.py}"
name="$(basename "$config" .py)"
work_dir="work_dirs/$name"

"$py" tools/make_demo_data.py --root data/ade_demo
# a new run on every start, over the last one (pass --resume to continue it instead)
"$py" tools/train.py "$config" --work-dir "$work_dir" --overwrite "$@"
ckpt="$work_dir/$(cat "$work_dir/last_checkpoint" | xargs basename)"
"$py" tools/test.py "$config" "$ckpt" --work-dir "$work_dir/test" --show-dir "$work_dir/vis" --overwrite \
    --cfg-options default_hooks.visualization.interval=4 2>&1 | tee "$work_dir/test.log"
miou="$(grep -oE 'mIoU: [0-9.]+' "$work_dir/test.log" | tail -n1)"
echo "demo finished: $miou (checkpoint $ckpt; prediction overlays in $work_dir/vis/vis_data/vis_image/)"
# seeded runs repeat their numbers on one CPU kind, not across kinds (float kernels round differently)
grep -E '^CPU: ' "$work_dir/test.log" | tail -n1 || true   # tools/test.py's last line on CPU
