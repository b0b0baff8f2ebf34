#!/usr/bin/env bash
# ctest scheduler.web_metrics and scheduler.web_dashboard: the daemon's web endpoint checked by
# Prometheus's own parser (metrics_check.py) and in headless Chromium (dashboard_check.py).
# Usage: web_check.sh metrics PYTHON EMBER SCHED_TRAINER
#        web_check.sh dashboard PYTHON EMBER SOURCE_DIR OUTDIR
# Without prometheus_client in PYTHON's environment, or without chromium on the PATH, the check
# skips and says so, except in CI (CI=true, as scripts/test.sh keys on), where scripts/setup.sh
# has installed both and a missing one fails: a lost package cannot pass as a skip there.
set -euo pipefail
check=$1 python=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
lacking() {
  if [[ ${CI:-} == true ]]; then
    echo "error: $1; CI runs this check (scripts/setup.sh installs it)"
    exit 1
  fi
  echo "skipped: $1 (scripts/setup.sh installs it)"
  exit 0
}
if ! "$python" -c 'import prometheus_client' 2>/dev/null; then lacking "$python lacks the prometheus_client package"; fi
case $check in
  metrics) exec "$python" "$here/metrics_check.py" "$@" ;;
  dashboard)
    chromium=$(command -v chromium || true)
    if [[ -z $chromium ]]; then lacking "no chromium on the PATH (Debian package chromium)"; fi
    exec "$python" "$here/dashboard_check.py" "$1" "$chromium" "$2" "$3"
    ;;
  *)
    echo "web_check.sh: expected metrics or dashboard, got '$check'" >&2
    exit 2
    ;;
esac
