#!/usr/bin/env bash
# The offline chain on generated data, one command (CPU or GPU), following the MIM study's protocol
# (tools/analysis/mim_study.py, configs/studies/) with one seed, the arms and decoders the study recommends on this
# data (docs/pretraining.md: VQ-KD targets beat scratch under both decoders on 'shapes'; BEiT's dVAE targets only under
# the linear one):
#   1 data: the 'shapes' set in ADE20K layout (labeled: outline, not colour, names the class) + an unlabeled pool
#   2 train a dVAE tokenizer on the unlabeled pool, export its encoder, held-out usage/perplexity/PSNR
#   3 BEiT MIM pretraining on the unlabeled pool: dVAE ids (tokens-blockwise), per-patch pixels (pixels-blockwise, the
#     VQ-KD's teacher), then a VQ-KD tokenizer distilled from that teacher and MIM on its ids (vqkd-blockwise)
#   4 segmentation fine-tuning on the labeled set from each MIM checkpoint and, with the same budget, from scratch,
#     with a linear decoder (the backbone does the spatial work) and with UPerNet
# and prints one line per stage ("[chain] <stage>: ..."), each metric next to its trivial baseline, per decoder
# every arm's difference to scratch next to the majority-class mIoU, and the study's recommendation ("[chain]
# recommendation: start from scratch: ..." when no pretrained arm's frozen probe beats random init by 1 mIoU point).
# Logs, checkpoints, configs and report.md: $CHAIN_WORK_DIR.
#
#   bash tools/run_chain.sh
# Environment overrides (defaults in brackets), e.g. for a smoke test:
#   CHAIN_DVAE_ITERS [1000]  CHAIN_MIM_ITERS [3000]  CHAIN_VQKD_ITERS [1500]  CHAIN_SEG_ITERS [1200]  CHAIN_SEED [0]
#   CHAIN_NUM_TRAIN [300] CHAIN_NUM_VAL [300]   labeled images      CHAIN_NUM_UNLABELED [3000]   unlabeled images
#   CHAIN_ARMS [tokens-blockwise vqkd-blockwise]   CHAIN_HEADS [linear upernet]   (scratch always runs)
#   CHAIN_WORKERS [2]   CHAIN_JOBS [2] (runs at a time)   CHAIN_WORK_DIR [work_dirs/chain]   CHAIN_DATA_DIR [data]
#   CHAIN_PYTHON [the venv of tools/setup_env.sh]   interpreter to use
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${CHAIN_PYTHON:-}" ]; then
    py="$CHAIN_PYTHON"
else
    venv="$(bash "$here/tools/setup_env.sh" | tail -n1)"
    py="$venv/bin/python"
fi
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"

work="${CHAIN_WORK_DIR:-work_dirs/chain}"
data="${CHAIN_DATA_DIR:-data}"
labeled="$data/shapes_chain"
unlabeled="$data/shapes_chain_unlabeled"
# the work dir (reused by the study) is checked before anything is written: no link, data root or dataset
"$py" -c 'import sys
from beit_mm.fileio.outputs import OutputError, check_output
try:
    check_output(sys.argv[1], overwrite=True, kind="dir", inputs=sys.argv[2:])
except OutputError as error:
    sys.exit(f"[chain] {error}")' "$work" "$labeled" "$unlabeled"
mkdir -p "$work"
start=$SECONDS

# 1. data
"$py" tools/make_demo_data.py --dataset shapes --root "$labeled" --num-train "${CHAIN_NUM_TRAIN:-300}" \
    --num-val "${CHAIN_NUM_VAL:-300}" --seed 0
"$py" tools/make_demo_data.py --dataset shapes --root "$unlabeled" --num-train "${CHAIN_NUM_UNLABELED:-3000}" \
    --num-val 0 --seed 1 --no-annotations

# 2-4. tokenizers, MIM, fine-tuning from MIM and from scratch
read -r -a arms <<< "${CHAIN_ARMS:-tokens-blockwise vqkd-blockwise}"
read -r -a heads <<< "${CHAIN_HEADS:-linear upernet}"
"$py" tools/analysis/mim_study.py --labeled-root "$labeled" --unlabeled-root "$unlabeled" --num-classes 7 \
    --arms scratch "${arms[@]}" --heads "${heads[@]}" --seeds "${CHAIN_SEED:-0}" --jobs "${CHAIN_JOBS:-2}" \
    --dvae-iters "${CHAIN_DVAE_ITERS:-1000}" --mim-iters "${CHAIN_MIM_ITERS:-3000}" \
    --vqkd-iters "${CHAIN_VQKD_ITERS:-1500}" --ft-iters "${CHAIN_SEG_ITERS:-1200}" --work-dir "$work" \
    --workers "${CHAIN_WORKERS:-2}" > "$work/study.log" 2>&1 || {
    tail -n 40 "$work/study.log" >&2; echo "[chain] failed; full log: $work/study.log" >&2; exit 1; }

# one line per stage, each with its baseline, and the study's recommendation (beit_mm.studies.report.chain_lines)
"$py" -c 'import sys
from beit_mm.fileio.json_file import read_json
from beit_mm.studies.report import chain_lines
print("\n".join(chain_lines(read_json(sys.argv[1]))))' "$work/report.json"
echo "[chain] done in $(( SECONDS - start )) s; logs, checkpoints and report.md in $work"
