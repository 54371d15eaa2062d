#!/usr/bin/env bash
# The classification demo on built-in data: creates or reuses the environment, generates the 5-class ImageNet-layout
# demo set if missing (beit_mm.data.demo.imagenet -> data/imagenet_demo), trains a tiny CvT on CPU (or GPU), evaluates
# it with tools/test.py and prints the final top-1. Checkpoints and logs land in work_dirs/<config name>/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$here/tools/setup_env.sh" | tail -n1)"
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
py="$venv/bin/python"
config="${CONFIG:-configs/demo/cvt-13-tiny_1xb32-30e_in1k-demo-64px.py}"
name="$(basename "$config" .py)"
work_dir="work_dirs/$name"

"$py" tools/make_demo_data.py --dataset imagenet --root data/imagenet_demo
# a new run on every start, over the last one (pass --resume to continue it instead)
"$py" tools/train.py "$config" --work-dir "$work_dir" --overwrite "$@"
ckpt="$work_dir/$(cat "$work_dir/last_checkpoint" | xargs basename)"
"$py" tools/test.py "$config" "$ckpt" --work-dir "$work_dir/test" 2>&1 | tee "$work_dir/test.log"
top1="$(grep -oE 'accuracy/top1: [0-9.]+' "$work_dir/test.log" | tail -n1)"
echo "demo finished: $top1 (checkpoint $ckpt)"
# seeded runs repeat their numbers on one CPU kind, not across kinds (float kernels round differently)
grep -E '^CPU: ' "$work_dir/test.log" | tail -n1 || true   # tools/test.py's last line on CPU
