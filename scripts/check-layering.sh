#!/usr/bin/env bash
# Checks the layering of docs/ARCHITECTURE.md: every #include of a project header must point
# down the table (core knows nothing above it; only interop/, train/, tools/, examples/, tests/
# and bench/ reach models/; the training library (train/) sits above dist/ and below the programs),
# the job scheduler (scheduler/) and in-job parallelism (dist/) share nothing but the error type, and inside core/ the tensor layer knows neither ops nor autograd, and the
# kernels know neither each other's backend nor the ops. Prints each offending line and exits 1
# if there is one. Run by ctest (test "layering"); usage:
# check-layering.sh [repository root]
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# A unit is a top-level folder, or one of these sub-folders or single files, which are units of
# their own (a file belongs to the longest unit its path starts with). The unit `core` is what is
# left of core/: the tensor layer, dtypes, devices, allocators, streams, RNG, dispatch and the
# kernel interfaces; core/ops.h gathers the op API, so it is a unit of the ops' side.
sub_units=(scheduler/learned scheduler/sim scheduler/daemon scheduler/policies core/ops core/ops.h core/autograd core/cpu core/cuda)

# What each unit may include besides system and third-party headers: units, whole folders with
# every unit inside them (an entry ending in /), or single headers (an entry ending in .h).
# Units not listed here (tools, tests, bench, include) may include everything. The job scheduler
# needs nothing of the tensor engine except through scheduler/learned/ (a policy network and a
# duration predictor trained with it), whose two factories' headers the registry names. Inside it,
# the core (the files at scheduler/'s top: jobs, cluster, decisions and how one is applied,
# admission, prediction) knows neither of its drivers (sim/, the trace simulator; daemon/, the
# live daemon) nor the policies (policies/) but through policies.h, the registry's list of them.
# Ops and autograd include each other: an op records a node, and the engine sums gradients and
# makes zeros with ops. The CUDA glue (cuDNN, cross-device copies) stages through Tensor members
# that record, so it may turn recording off (grad_mode.h) but may not reach the graph.
declare -A allowed=(
  [core]="core"
  [core/ops.h]="core core/ops"
  [core/ops]="core core/ops core/ops.h core/autograd"
  [core/autograd]="core core/autograd core/ops core/ops.h"
  [core/cpu]="core core/cpu"
  [core/cuda]="core core/cuda core/autograd/grad_mode.h"
  [layers]="core/ layers proto"
  [data]="core/ data proto"
  [models]="core/ layers models proto"
  [interop]="core/ layers data models proto interop"
  [scheduler]="core/error.h scheduler proto scheduler/policies/policies.h scheduler/learned/learned_policy.h scheduler/learned/quantile_predictor.h"
  [scheduler/policies]="core/error.h scheduler scheduler/policies"
  [scheduler/sim]="core/error.h scheduler scheduler/sim"
  [scheduler/daemon]="core/error.h scheduler scheduler/sim scheduler/daemon proto"
  [scheduler/learned]="core/ layers scheduler scheduler/sim scheduler/learned proto"
  [dist]="core/ layers dist"
  [train]="core/ layers data models interop dist train"
  [examples]="core/ layers data models interop scheduler/ dist train proto ember"
)
project_dirs=" core layers data models interop scheduler dist train proto tools examples tests bench ember "

unit_of() {
  local path=$1 best=${1%%/*} u
  for u in "${sub_units[@]}"; do
    if [[ ("$path" == "$u" || "$path" == "$u"/*) && ${#u} -gt ${#best} ]]; then best=$u; fi
  done
  printf '%s' "$best"
}

# allows <entries> <target header> <its unit>: whether one of the entries admits the header.
allows() {
  local entry
  for entry in $1; do
    if [[ "$entry" == */ ]]; then
      [[ "$3" == "${entry%/}" || "$3" == "$entry"* ]] && return 0
    elif [[ "$3" == "$entry" || "$2" == "$entry" ]]; then
      return 0
    fi
  done
  return 1
}

violations=0
files=0
while IFS= read -r file; do
  rel=${file#"$root"/}
  unit=$(unit_of "$rel")
  [[ -n "${allowed[$unit]+x}" ]] || continue
  [[ "$unit" == *.h ]] && shown=$unit || shown=$unit/
  files=$((files + 1))
  while IFS= read -r hit; do
    lineno=${hit%%:*}
    target=$(sed -E 's/^[^#]*#[[:space:]]*include[[:space:]]*[<"]([^>"]*)[>"].*/\1/' <<<"${hit#*:}")
    top=${target%%/*}
    [[ "$target" == */* ]] || continue               # same-folder or system header
    [[ "$project_dirs" == *" $top "* ]] || continue  # third-party header
    if [[ "$top" == ember && "$target" != ember/ember.h ]]; then
      continue                                       # <ember/config.h>: build configuration
    fi
    target_unit=$(unit_of "$target")
    if ! allows "${allowed[$unit]}" "$target" "$target_unit"; then
      echo "$rel:$lineno: includes $target, but $shown may include only ${allowed[$unit]// /, }" >&2
      violations=$((violations + 1))
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$file" || true)
done < <(find "$root" -path "$root/build*" -prune -o -path "$root/.git" -prune -o -path "$root/.venv" -prune -o -type f \
           \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)

echo "layering: $files files checked, $violations violations"
((violations == 0))
