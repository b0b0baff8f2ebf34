#!/usr/bin/env bash
# bench/gpu_vs_torch.sh (Ember beside PyTorch in alternating processes, scripts/gpu-check.sh's
# block on a lent GPU) and its table, as far as the CPU takes them:
# - two rounds on the CPU of one workload: Ember's and (when the torch venv is there) PyTorch's
#   lines tagged per round and config, the table's row built from them (median and spread), the
#   --cuda-graph refusal on the CPU and the compile timeout reported as notes;
# - the table builder's medians, spreads and ratios on known lines, and its refusal of a malformed
#   line (exit 2, the line named).
# Usage: gpu_vs_torch_test.sh <step_rate program> <python with torch, or none>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/../../bench
step_rate=${1:?usage: gpu_vs_torch_test.sh <step_rate> <python|none>}
python=${2:?usage: gpu_vs_torch_test.sh <step_rate> <python|none>}
[[ -x $python ]] || python=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=check_lib.sh
source "$here/check_lib.sh"
has() { grep -qE -- "$2" "$1"; }  # has <file> <regex>: reads the whole file (no pipe)
count() { grep -cE -- "$2" "$1" || true; }

# 1. The runner on the CPU.
rc=0
bash "$bench/gpu_vs_torch.sh" --out "$tmp/run" --device cpu --python "$python" --rounds 2 --reps 1 \
  --run-seconds 0 --workloads bilstm --compile-timeout 2 --budget 300 -- "$step_rate" >"$tmp/run.out" 2>&1 || rc=$?
cat "$tmp/run.out"
check "runner exits 0" test "$rc" -eq 0
mkdir -p "$tmp/run"
[[ -f $tmp/run/raw.txt ]] || : >"$tmp/run/raw.txt"
[[ -f $tmp/run/table.md ]] || : >"$tmp/run/table.md"
raw=$tmp/run/raw.txt
check "Ember fp32 line per round" test "$(count "$raw" '^[12] ember fp32 bilstm 1 [0-9.e+]+ ')" -eq 2
check "Ember bf16 line per round" test "$(count "$raw" '^[12] ember bf16 bilstm ')" -eq 2
check "graph refused on the CPU, per round" test "$(count "$raw" '^# [12] ember graph failed: .*capture needs a CUDA device')" -eq 2
check "table row for bilstm" has "$tmp/run/table.md" '^\| bilstm \| [0-9.]+ \([0-9.]+-[0-9.]+\) \|'
check "table notes the graph refusal once" test "$(count "$tmp/run/table.md" '^- ember graph: .*capture needs a CUDA device')" -eq 1
if [[ $python != none ]]; then
  check "PyTorch fp32 line per round" test "$(count "$raw" '^[12] torch fp32 bilstm 1 [0-9.e+]+ ')" -eq 2
  check "ratio in the table" has "$tmp/run/table.md" '^\| bilstm \| [^|]+ \| [0-9.]+ \([^)]*\) \| [0-9.]+x \|'
  check "compile timeout noted" has "$tmp/run/table.md" '^- torch compile: timed out after 2 s'
else
  echo "note: no torch venv (bench/setup_torch.sh): PyTorch's side not run"
  check "no-torch noted" has "$tmp/run/table.md" '^- torch compile: no torch'
fi

# 2. The table builder on known lines: medians over rounds, the spread, the ratios.
cat >"$tmp/known.txt" <<'RAW'
1 ember fp32 mnist_cnn 1 10 9 11 64 1.0752
2 ember fp32 mnist_cnn 1 30 29 31 64 1.0752
3 ember fp32 mnist_cnn 1 20 19 21 64 1.0752
1 torch fp32 mnist_cnn 1 8 8 8 64 1.0752
2 torch fp32 mnist_cnn 1 10 10 10 64 1.0752
3 torch fp32 mnist_cnn 1 12 12 12 64 1.0752
1 ember graph mnist_cnn 1 50 50 50 64 1.0752
# 1 torch compile compile mnist_cnn 1 12.5 3 0
1 torch compile mnist_cnn 1 25 25 25 64 1.0752
# 1 ember graph failed: refused for a reason
# 2 ember graph failed: refused for a reason
RAW
python3 "$bench/gpu_vs_torch_table.py" "$tmp/known.txt" --device cuda --rounds 3 --torch 2.11 >"$tmp/known.md" || true
cat "$tmp/known.md"
check "median and spread" has "$tmp/known.md" '^\| mnist_cnn \| 20 \(10-30\) \| 10 \(8-12\) \| 2\.00x \|'
check "graph ratio and compile time" has "$tmp/known.md" '\| 50 \| 5\.00x \| 25 \(12\.5 s\) \| 0\.80x \|$'
check "repeated reason noted once" test "$(count "$tmp/known.md" '^- ember graph: refused for a reason$')" -eq 1
check "fp32 goal met" has "$tmp/known.md" '^- goal mnist_cnn fp32 >= 1\.2x PyTorch eager: 2\.00x, met$'
check "graph goal met" has "$tmp/known.md" '^- goal mnist_cnn CUDA graph >= 1\.5x PyTorch eager: 5\.00x, met$'
sed 's/^\([123]\) ember fp32 mnist_cnn 1 [0-9]*/\1 ember fp32 mnist_cnn 1 11/' "$tmp/known.txt" >"$tmp/slow.txt"
python3 "$bench/gpu_vs_torch_table.py" "$tmp/slow.txt" --device cuda --rounds 3 --torch 2.11 >"$tmp/slow.md" || true
check "fp32 goal missed" has "$tmp/slow.md" '^- goal mnist_cnn fp32 >= 1\.2x PyTorch eager: 1\.10x, missed$'
printf '1 ember fp32 mnist_cnn 1 10 9 11 64 1.0752\n1 ember fp32 mnist_cnn 1 ten 9 11 64 1.0752\n' >"$tmp/bad.txt"
rc=0
python3 "$bench/gpu_vs_torch_table.py" "$tmp/bad.txt" --device cuda --rounds 1 >"$tmp/bad.md" 2>"$tmp/bad.err" || rc=$?
check "malformed line refused" test "$rc" -eq 2
check "malformed line named" has "$tmp/bad.err" 'line 2: expected'
check "nothing printed for it" test ! -s "$tmp/bad.md"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
