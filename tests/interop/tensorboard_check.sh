#!/usr/bin/env bash
# ctest interop.tensorboard: writes known summaries (tensorboard_cases) and has TensorBoard's own
# reader check them (tensorboard_check.py). Usage: tensorboard_check.sh TENSORBOARD_CASES PYTHON
set -euo pipefail
cases=$1 python=$2
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import tensorboard' 2>/dev/null; then
  echo "skipped: $python lacks tensorboard (scripts/setup.sh installs it into .venv/)"
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cases" "$dir"
"$python" "$here/tensorboard_check.py" "$dir"
