#!/usr/bin/env bash
# Tests scripts/check-writers.sh on a small tree that writes files behind the writer's back.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/core" "$tree/tools" "$tree/scheduler/daemon"
cat >"$tree/core/atomic_file.cpp" <<'CPP'
int fd = ::open(tmp, O_WRONLY | O_CREAT);  // the writer itself: allowed
CPP
cat >"$tree/tools/report.cpp" <<'CPP'
std::ofstream out(path);
std::FILE* f = std::fopen(path.c_str(), "wb");
std::FILE* g = std::fopen(path.c_str(), "rb");  // reading is fine
std::rename(tmp.c_str(), path.c_str());
CPP
cat >"$tree/scheduler/daemon/daemon.cpp" <<'CPP'
lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);  // listed: allowed
CPP
out=$("$here/../../scripts/check-writers.sh" "$tree" 2>&1)
rc=$?
echo "$out"
failures=0
check() {
  if grep -qF -- "$1" <<<"$out"; then echo "ok   reports $1"; else echo "FAIL does not report $1"; failures=$((failures + 1)); fi
}
[[ $rc -ne 0 ]] || { echo "FAIL exit code 0 on a tree with unlisted writers"; failures=$((failures + 1)); }
check "tools/report.cpp:1:"
check "tools/report.cpp:2:"
check "tools/report.cpp:4:"
check "3 place(s)"
if grep -qE "report.cpp:3:|atomic_file.cpp|daemon.cpp" <<<"$out"; then
  echo "FAIL reports a read or a listed place"
  failures=$((failures + 1))
fi
echo "$((6 - failures)) passed, $failures failed"
((failures == 0))
