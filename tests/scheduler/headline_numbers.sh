#!/usr/bin/env bash
# The scheduler's headline numbers in bench/RESULTS.md ("Scheduler: policies on the Philly week",
# "Scheduler: the learned policy"), pinned: on the Philly week (W41) with 256 devices in one flat
# pool, the average JCT of SRSF, gittins and the shipped learned policy must be within 0.1% of
# the recorded values, at every CPU level this build has and this CPU runs (the learned policy's
# network runs on Ember's kernels, whose sums differ between levels). The simulator is
# deterministic; a change that moves one of these numbers must update RESULTS.md and this file.
# Usage: headline_numbers.sh <ember program> <philly_w41.csv>
set -uo pipefail
ember=${1:?usage: headline_numbers.sh <ember> <philly_w41.csv>}
trace=${2:?usage: headline_numbers.sh <ember> <philly_w41.csv>}
if [[ ! -f $trace ]]; then
  if [[ ${EMBER_REQUIRE_SHARED_DATA:-} == 1 ]]; then echo "FAIL: no $trace"; exit 1; fi
  echo "skipped: no $trace"
  exit 77
fi
# policy and its recorded average JCT in seconds (bench/RESULTS.md, 256 devices, flat)
recorded=("srsf 8989" "gittins 10091" "learned 9887")
levels=$("$ember" info | sed -n 's/^levels usable: *//p' | tr -d ',')
[[ -n $levels ]] || { echo "FAIL: ember info names no usable CPU level"; exit 1; }
failures=0
for level in $levels; do
  for r in "${recorded[@]}"; do
    read -r policy want <<<"$r"
    out=$(EMBER_CPU_CAPABILITY=$level "$ember" sched simulate --trace "$trace" --gpus 256 --node-gpus 0 \
      --policy "$policy" 2>&1)
    got=$(sed -nE 's/^ *avg JCT +([0-9.]+) s.*/\1/p' <<<"$out")
    if [[ -z $got ]]; then
      echo "FAIL $level $policy: no average JCT in the output:"
      echo "$out" | tail -5
      failures=$((failures + 1))
      continue
    fi
    # |got - want| <= 0.1% of want, in integers: 1000 |got - want| <= want
    if awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(1000 * d <= w) }'; then
      echo "ok   $level $policy: avg JCT $got s (recorded $want s)"
    else
      echo "FAIL $level $policy: avg JCT $got s, recorded $want s (more than 0.1% apart)"
      failures=$((failures + 1))
    fi
  done
done
((failures == 0))
