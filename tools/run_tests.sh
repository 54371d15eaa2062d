#!/usr/bin/env bash
# The test command: creates or reuses the environment (tools/setup_env.sh), then runs pytest on tests/.
# Extra arguments go to pytest, e.g. `bash tools/run_tests.sh -k beit -x`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$here/tools/setup_env.sh" | tail -n1)"
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" -m pytest tests -q -p no:cacheprovider "$@"
