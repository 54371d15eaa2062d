#!/usr/bin/env bash
# The offline chain on generated demo data, one command (CPU or GPU):
#   1 demo data: ADE20K layout (tools/make_demo_data.py) + ImageNet layout (beit_mm.data.demo_imagenet)
#   2 train a dVAE tokenizer         configs/dvae/dvae-tiny_1xb16-200i_demo-48px.py
#   3 export its encoder             tools/convert_checkpoint.py --model dalle --source dvae -> $work/tokenizer.pth
#   4 BEiT MIM pretraining           configs/beit/beit-tiny-p16_1xb16-coslr-300i_demo-mim.py with that tokenizer
#   5 classification fine-tuning     configs/beit/beit-tiny-p16_mim-pre_1xb32-10e_demo-in1k.py from the MIM checkpoint
#   6 segmentation fine-tuning       configs/beit/beit-tiny-p16_mim-pre_upernet_1xb8-300i_ade20k-demo-64x64.py, same
# and prints one metric line per stage ("[chain] <stage>: ..."). Logs: $work/<stage>.log.
#
#   bash tools/run_chain.sh
# Environment overrides (defaults in brackets), e.g. for a smoke test:
#   CHAIN_DVAE_ITERS [200]  CHAIN_MIM_ITERS [300]  CHAIN_CLS_EPOCHS [10]  CHAIN_SEG_ITERS [300]
#   CHAIN_BATCH [config values]   batch size of every stage
#   CHAIN_WORKERS [2]             dataloader workers
#   CHAIN_WORK_DIR [work_dirs/chain]   CHAIN_DATA_DIR [data]
#   CHAIN_NUM_TRAIN [200] CHAIN_NUM_VAL [40]          ADE20K-layout images
#   CHAIN_PER_CLASS_TRAIN [40] CHAIN_PER_CLASS_VAL [10]  ImageNet-layout images per class (5 classes)
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

dvae_iters="${CHAIN_DVAE_ITERS:-200}"
mim_iters="${CHAIN_MIM_ITERS:-300}"
cls_epochs="${CHAIN_CLS_EPOCHS:-10}"
seg_iters="${CHAIN_SEG_ITERS:-300}"
workers="${CHAIN_WORKERS:-2}"
work="${CHAIN_WORK_DIR:-work_dirs/chain}"
data="${CHAIN_DATA_DIR:-data}"
ade="$data/ade_demo"
imnet="$data/imagenet_demo"
mkdir -p "$work"

# logger interval that divides the iteration count (so the last iteration is logged)
log_every() { if [ $(( $1 % $2 )) -eq 0 ]; then echo "$2"; else echo 1; fi; }
# dataloader options for the given dataloaders
loader_opts() {
    local persistent=True opts=()
    [ "$workers" -eq 0 ] && persistent=False
    for dl in "$@"; do
        opts+=("$dl.num_workers=$workers" "$dl.persistent_workers=$persistent")
        [ -n "${CHAIN_BATCH:-}" ] && opts+=("$dl.batch_size=$CHAIN_BATCH")
    done
    echo "${opts[@]}"
}
last_ckpt() { echo "$1/$(basename "$(cat "$1/last_checkpoint")")"; }
field() { grep -oE "$1: [-0-9.e]+" | tail -n1 | awk '{print $2}'; }
train() {  # stage config options...
    local stage="$1" config="$2"; shift 2
    echo "[chain] $stage: training $config" >&2
    "$py" tools/train.py "$config" --work-dir "$work/$stage" --cfg-options "$@" > "$work/$stage.log" 2>&1 || {
        tail -n 40 "$work/$stage.log" >&2; echo "[chain] $stage failed; full log: $work/$stage.log" >&2; exit 1; }
}
start=$SECONDS

# 1. data
"$py" tools/make_demo_data.py --root "$ade" --num-train "${CHAIN_NUM_TRAIN:-200}" --num-val "${CHAIN_NUM_VAL:-40}"
"$py" tools/make_demo_data.py --dataset imagenet --root "$imnet" --num-train "${CHAIN_PER_CLASS_TRAIN:-40}" \
    --num-val "${CHAIN_PER_CLASS_VAL:-10}"

# 2. dVAE tokenizer
train dvae configs/dvae/dvae-tiny_1xb16-200i_demo-48px.py \
    train_cfg.max_iters="$dvae_iters" default_hooks.checkpoint.interval="$dvae_iters" \
    default_hooks.logger.interval="$(log_every "$dvae_iters" 20)" train_dataloader.dataset.data_root="$ade" \
    $(loader_opts train_dataloader)
line="$(grep 'Iter(train)' "$work/dvae.log" | tail -n1)"
echo "[chain] dvae: iters=$dvae_iters loss_rec=$(field loss_rec <<< "$line") perplexity=$(field perplexity <<< "$line")" \
     "codebook_usage=$(field codebook_usage <<< "$line") (vocab 512)"

# 3. export the encoder (a plain beit_mm.DALLEEncoder state dict)
tokenizer="$work/tokenizer.pth"
"$py" tools/convert_checkpoint.py --model dalle --source dvae "$(last_ckpt "$work/dvae")" "$tokenizer"

# 4. MIM pretraining with the exported tokenizer
train mim configs/beit/beit-tiny-p16_1xb16-coslr-300i_demo-mim.py \
    model.target_generator.init_cfg.checkpoint="$tokenizer" train_cfg.max_iters="$mim_iters" \
    default_hooks.checkpoint.interval="$mim_iters" default_hooks.logger.interval="$(log_every "$mim_iters" 10)" \
    train_dataloader.dataset.data_root="$ade" $(loader_opts train_dataloader)
line="$(grep 'Iter(train)' "$work/mim.log" | tail -n1)"
echo "[chain] mim: iters=$mim_iters loss=$(field ' loss' <<< "$line") mim_acc=$(field mim_acc <<< "$line")"
mim_ckpt="$(last_ckpt "$work/mim")"

# 5. ImageNet-style classification from the MIM checkpoint
train cls configs/beit/beit-tiny-p16_mim-pre_1xb32-10e_demo-in1k.py \
    model.backbone.init_cfg.checkpoint="$mim_ckpt" train_cfg.max_epochs="$cls_epochs" \
    train_cfg.val_interval="$cls_epochs" default_hooks.checkpoint.interval="$cls_epochs" \
    default_hooks.logger.interval=1 train_dataloader.dataset.data_root="$imnet" \
    val_dataloader.dataset.data_root="$imnet" test_dataloader.dataset.data_root="$imnet" \
    $(loader_opts train_dataloader val_dataloader test_dataloader)
echo "[chain] cls: epochs=$cls_epochs top1=$(field 'accuracy/top1' < "$work/cls.log")"

# 6. ADE20K-style segmentation from the MIM checkpoint
train seg configs/beit/beit-tiny-p16_mim-pre_upernet_1xb8-300i_ade20k-demo-64x64.py \
    model.backbone.init_cfg.checkpoint="$mim_ckpt" train_cfg.max_iters="$seg_iters" \
    train_cfg.val_interval="$seg_iters" default_hooks.checkpoint.interval="$seg_iters" \
    default_hooks.logger.interval="$(log_every "$seg_iters" 25)" train_dataloader.dataset.data_root="$ade" \
    val_dataloader.dataset.data_root="$ade" test_dataloader.dataset.data_root="$ade" \
    $(loader_opts train_dataloader val_dataloader test_dataloader)
echo "[chain] seg: iters=$seg_iters mIoU=$(field mIoU < "$work/seg.log")"
echo "[chain] done in $(( SECONDS - start )) s; logs and checkpoints in $work"
