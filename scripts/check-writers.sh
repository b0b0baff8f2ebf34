#!/usr/bin/env bash
# Every file Ember writes for a user goes through core/atomic_file.h (write_file_atomic), which
# never leaves a half-written file and never replaces what is not a regular file. This check finds
# every other way of creating, truncating or renaming a file in the project's sources and fails
# unless the place is one of the few listed below, each with the reason it cannot or need not use
# the writer. Usage: scripts/check-writers.sh [SOURCE_ROOT]
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2

# file|why: places that may write files by other means.
allowed=(
  "core/atomic_file.cpp|the writer itself"
  "scheduler/daemon/supervisor.cpp|a forked child may only make plain system calls; it writes the job's exit status into the daemon's own state folder, and appends the job's log"
  "scheduler/daemon/daemon.cpp|the daemon's lock file in its state folder: created if missing, never truncated"
  "scheduler/daemon/lifecycle.cpp|appends a line to a job's log in the daemon's state folder"
  "tools/launch.cpp|status files in the private folder ember launch makes for its ranks"
  "train/progress.cpp|the metrics log is appended to, never replaced; rewriting it goes through the writer"
  "bench/sched_load.cpp|copies a database it prepared into the fresh folder it made for the daemon it measures"
  "interop/summary_writer.cpp|a TensorBoard event file is an append-only log, created exclusively under a new name (never replaces a file) and flushed record by record"
)

# What counts as writing a file outside the writer (hidden folders skipped: bench/.venv-torch holds
# PyTorch's headers, not Ember's sources).
pattern='std::ofstream|std::fstream|fopen\(.*"[wa]|\bO_CREAT\b|\bO_TRUNC\b|[^_a-z]rename\(|std::filesystem::rename|fs::rename|fs::copy'
dirs=(core layers models interop data scheduler train tools examples bench proto)
status=0
count=0
while IFS= read -r hit; do
  file=${hit%%:*}
  ok=0
  for entry in "${allowed[@]}"; do
    [[ $file == "${entry%%|*}" ]] && ok=1
  done
  if ((ok == 0)); then
    echo "$hit"
    count=$((count + 1))
    status=1
  fi
done < <(grep -rnE --exclude-dir='.*' --include='*.cpp' --include='*.h' --include='*.cu' --include='*.cuh' "$pattern" "${dirs[@]}" 2>/dev/null)
if ((status)); then
  echo "check-writers: $count place(s) write files without core/atomic_file.h (write_file_atomic);"
  echo "use it, or add the file to the list in scripts/check-writers.sh with the reason."
else
  echo "check-writers: every file is written through core/atomic_file.h or a listed exception"
fi
exit $status
