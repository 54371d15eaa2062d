#!/usr/bin/env bash
# Training on a slurm cluster: bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [train.py args]
# Environment: GPUS (4), GPUS_PER_NODE (4), CPUS_PER_TASK (5), SRUN_ARGS (""), PYTHON (python); MASTER_PORT (29500)
# is read by mmengine's slurm launcher.
set -euxo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
GPUS=${GPUS:-4}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
PYTHON=${PYTHON:-python}
here="$(cd "$(dirname "$0")" && pwd)"

# SRUN_ARGS is split into words on purpose (several srun options in one variable).
# shellcheck disable=SC2086
PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    $SRUN_ARGS \
    "$PYTHON" -u "$here/train.py" "$CONFIG" --launcher="slurm" "${@:4}"
