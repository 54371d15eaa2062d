#!/usr/bin/env bash
# Distributed testing with torchrun: bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py args]
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (a free port on one node; 29500 on several,
# where it must be the same on every node), PYTHON (python). Without CUDA the processes run on CPU with gloo.
set -euo pipefail
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}
here="$(cd "$(dirname "$0")" && pwd)"
if [ -z "${PORT:-}" ]; then
  if [ "$NNODES" -eq 1 ]; then
    PORT=$("$PYTHON" -c "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1]); s.close()")
  else
    PORT=29500
  fi
fi

PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" \
"$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$here/test.py" \
    "$CONFIG" \
    "$CHECKPOINT" \
    --launcher pytorch "${@:4}"
