#!/usr/bin/env bash
# The GPU bundle's launcher (scripts/gpu-bundle.sh copies this file to gpu-bundle/run):
#   run PROGRAM [ARGS...]   runs bin/PROGRAM with the device's NVIDIA libraries on the search path
#   run --check             lists where each library of vendor-libs was found, exit 0 if all were
# The NVIDIA libraries come from the machine: the CUDA driver (libcuda.so.1, through ldconfig or
# the driver's folder) and the CUDA runtime, cuBLAS, cuDNN and NCCL from NVIDIA's pip wheels (the
# `nvidia` Python namespace package), from a CUDA toolkit, or from LD_LIBRARY_PATH. Where one is
# missing, it says which and where it looked, and exits 3: a program must never start without a
# vendor library and quietly use a fallback.
set -uo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)

dirs=()
IFS=: read -r -a from_env <<<"${LD_LIBRARY_PATH:-}"
for d in "${from_env[@]}"; do [[ -n $d ]] && dirs+=("$d"); done
# The wheels' library folders: nvidia/<package>/lib (CUDA 12 layout) and nvidia/cu13/lib (13).
py=$(command -v python3 || true)
if [[ -n $py ]]; then
  while IFS= read -r d; do [[ -d $d ]] && dirs+=("$d"); done < <(
    "$py" - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
for r in roots:
    for lib in sorted(glob.glob(os.path.join(r, "*", "lib"))) + sorted(glob.glob(os.path.join(r, "*", "*", "lib"))):
        print(lib)
PY
  )
fi
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
  /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [[ -d $d ]] && dirs+=("$d")
done

find_lib() {  # find_lib <soname>: prints the folder that holds it
  local d
  for d in "${dirs[@]}"; do
    [[ -e $d/$1 ]] && { echo "$d"; return 0; }
  done
  # The driver is often only in ldconfig's cache.
  d=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ {print $NF; exit}')
  [[ -n $d ]] && { dirname "$d"; return 0; }
  return 1
}

found=() missing=()
path=()
while IFS= read -r soname; do
  [[ -z $soname ]] && continue
  if d=$(find_lib "$soname"); then
    found+=("$soname => $d/$soname")
    [[ " ${path[*]} " == *" $d "* ]] || path+=("$d")
  else
    missing+=("$soname")
  fi
done <"$here/vendor-libs"

if [[ ${1:-} == --check ]]; then
  printf '  %s\n' "${found[@]}"
fi
if ((${#missing[@]})); then
  {
    echo "gpu-bundle: this machine lacks ${missing[*]}"
    echo "  looked in: ${dirs[*]} and ldconfig's cache"
    echo "  (pip wheels: nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13; the driver: libcuda.so.1)"
  } >&2
  exit 3
fi
[[ ${1:-} == --check ]] && exit 0
program=${1:?usage: run PROGRAM [ARGS...] | run --check}
shift
[[ -x $here/bin/$program ]] || { echo "gpu-bundle: no program '$program' (have: $(ls "$here/bin" | tr '\n' ' '))" >&2; exit 2; }
# The bundle's own libraries first: a system copy of, say, OpenBLAS must not stand in for them.
LD_LIBRARY_PATH=$here/lib$(printf ':%s' "${path[@]}") exec "$here/bin/$program" "$@"
