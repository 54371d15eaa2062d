#!/usr/bin/env bash
# Distributed training with torchrun: bash tools/dist_train.sh CONFIG GPUS [train.py args]
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1), PORT (a free port on one node; 29500 on several,
# where it must be the same on every node), PYTHON (python). Without CUDA the processes run on CPU with gloo, at most
# one per usable core (more is refused before anything starts: beit_mm.engine.cpu_processes.check_cpu_processes).
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}
here="$(cd "$(dirname "$0")" && pwd)"
# The check runs from its file (it imports only torch), not through `import beit_mm` (~15 s of registrations).
if ! "$PYTHON" - "$here/../beit_mm/engine/cpu_processes.py" "$GPUS" <<'EOF'; then
import importlib.util
import sys
spec = importlib.util.spec_from_file_location('beit_mm_cpu_processes', sys.argv[1])
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)
try:
    check.check_cpu_processes(int(sys.argv[2]))
except check.TooManyCPUProcessesError as error:
    sys.exit(f'dist_train.sh: error: {error}')
EOF
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
