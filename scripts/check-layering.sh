#!/usr/bin/env bash
# Checks the layering of docs/ARCHITECTURE.md: every #include of a project header must point
# down the table (core knows nothing above it; only tools/, examples/, tests/ and bench/ reach
# models/). Prints each offending line and exits 1 if there is one. Run by ctest (test
# "layering"); usage: check-layering.sh [repository root]
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}

# What each folder may include besides system and third-party headers. Folders not listed here
# (tools, tests, bench, include) may include everything.
declare -A allowed=(
  [core]="core"
  [layers]="core layers proto"
  [data]="core data proto"
  [models]="core layers models proto"
  [scheduler]="core layers scheduler proto"
  [examples]="core layers data models scheduler proto ember"
)
project_dirs=" core layers data models scheduler proto tools examples tests bench ember "

violations=0
files=0
for folder in "${!allowed[@]}"; do
  [[ -d "$root/$folder" ]] || continue
  ok=" ${allowed[$folder]} "
  while IFS= read -r file; do
    files=$((files + 1))
    while IFS= read -r hit; do
      lineno=${hit%%:*}
      target=$(sed -E 's/^[^#]*#[[:space:]]*include[[:space:]]*[<"]([^>"]*)[>"].*/\1/' <<<"${hit#*:}")
      top=${target%%/*}
      [[ "$target" == */* ]] || continue                # same-folder or system header
      [[ "$project_dirs" == *" $top "* ]] || continue   # third-party header
      if [[ "$top" == ember && "$target" != ember/ember.h ]]; then
        continue                                        # <ember/config.h>: build configuration
      fi
      if [[ "$ok" != *" $top "* ]]; then
        echo "${file#"$root"/}:$lineno: includes $target, but $folder/ may include only ${allowed[$folder]// /, }" >&2
        violations=$((violations + 1))
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$file" || true)
  done < <(find "$root/$folder" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \))
done

echo "layering: $files files checked, $violations violations"
((violations == 0))
