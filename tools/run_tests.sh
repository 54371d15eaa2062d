#!/usr/bin/env bash
# The test command: creates or reuses the environment (tools/setup_env.sh), then runs pytest on tests/.
# Extra arguments go to pytest, e.g. `bash tools/run_tests.sh -k beit -x`; test paths among them replace the
# default `tests/` (`bash tools/run_tests.sh tests/test_beit.py -x` runs that file only).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$(bash "$here/tools/setup_env.sh" | tail -n1)"
cd "$here"
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
targets=(tests)
for arg in "$@"; do
  case "$arg" in tests/*|./tests/*) targets=(); break ;; esac
done
exec "$venv/bin/python" -m pytest "${targets[@]}" -q -p no:cacheprovider "$@"
