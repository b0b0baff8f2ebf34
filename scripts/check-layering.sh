#!/usr/bin/env bash
# Checks the layering of docs/ARCHITECTURE.md: every #include of a project header must point
# down the table (core knows nothing above it; only tools/, examples/, tests/ and bench/ reach
# models/), and the two halves of scheduler/ (the job scheduler and scheduler/parallel/, in-job
# parallelism) share nothing but the error type. Prints each offending line and exits 1 if there
# is one. Run by ctest (test "layering"); usage: check-layering.sh [repository root]
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# A unit is a top-level folder, or one of these sub-folders, which are units of their own (a file
# belongs to the longest unit its path starts with).
sub_units=(scheduler/parallel)

# What each unit may include besides system and third-party headers: units, or single headers
# (an entry ending in .h). Units not listed here (tools, tests, bench, include) may include
# everything.
declare -A allowed=(
  [core]="core"
  [layers]="core layers proto"
  [data]="core data proto"
  [models]="core layers models proto"
  [scheduler]="core/error.h scheduler proto"
  [scheduler/parallel]="core layers scheduler/parallel"
  [examples]="core layers data models scheduler scheduler/parallel proto ember"
)
project_dirs=" core layers data models scheduler proto tools examples tests bench ember "

unit_of() {
  local path=$1 best=${1%%/*} u
  for u in "${sub_units[@]}"; do
    if [[ "$path" == "$u"/* && ${#u} -gt ${#best} ]]; then best=$u; fi
  done
  printf '%s' "$best"
}

violations=0
files=0
while IFS= read -r file; do
  rel=${file#"$root"/}
  unit=$(unit_of "$rel")
  [[ -n "${allowed[$unit]+x}" ]] || continue
  ok=" ${allowed[$unit]} "
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
    if [[ "$ok" != *" $target_unit "* && "$ok" != *" $target "* ]]; then
      echo "$rel:$lineno: includes $target, but $unit/ may include only ${allowed[$unit]// /, }" >&2
      violations=$((violations + 1))
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$file" || true)
done < <(find "$root" -path "$root/build*" -prune -o -path "$root/.git" -prune -o -type f \
           \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)

echo "layering: $files files checked, $violations violations"
((violations == 0))
