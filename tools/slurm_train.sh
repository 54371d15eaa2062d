#!/usr/bin/env bash
# Training on a slurm cluster: bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG [train.py args]
# Environment: GPUS (4), GPUS_PER_NODE (4), CPUS_PER_TASK (the config's train_dataloader.num_workers + 1 for the
# training process itself; docs/performance.md#data-loading sizes the workers), SRUN_ARGS (""), PYTHON (python);
# MASTER_PORT (29500) is read by mmengine's slurm launcher.
set -euxo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
GPUS=${GPUS:-4}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
SRUN_ARGS=${SRUN_ARGS:-""}
PYTHON=${PYTHON:-python}
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${CPUS_PER_TASK:-}" ]; then  # one core per DataLoader worker of the config, one for the training process
  workers="$(PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -c 'import sys
from mmengine.config import Config
print(Config.fromfile(sys.argv[1], import_custom_modules=False).train_dataloader.get("num_workers", 0))' "$CONFIG")" \
    || { echo "slurm_train.sh: cannot read train_dataloader.num_workers of $CONFIG; set CPUS_PER_TASK" >&2; exit 2; }
  CPUS_PER_TASK=$((workers + 1))
fi

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
