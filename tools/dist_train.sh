#!/usr/bin/env bash
# Distributed training with torchrun: bash tools/dist_train.sh CONFIG GPUS [train.py args]
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (a free port on one node; 29500 on several,
# where it must be the same on every node), PYTHON (python). Without CUDA the processes run on CPU with gloo, at most
# one per usable core (more is refused before anything starts: beit_mm.engine.launch.check_cpu_processes).
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}
here="$(cd "$(dirname "$0")" && pwd)"
if ! PYTHONPATH="$here/..${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -c "import sys
from beit_mm.engine.launch import TooManyCPUProcessesError, check_cpu_processes
try:
    check_cpu_processes(int(sys.argv[1]))
except TooManyCPUProcessesError as error:
    sys.exit(f'dist_train.sh: error: {error}')" "$GPUS"; then
  exit 2
fi
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
    "$here/train.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
