#!/usr/bin/env bash
# Builds, here on a CPU machine with the CUDA toolkit, everything the GPU check runs on a lent GPU
# machine, and packs it into one self-contained folder (default gpu-bundle/, ignored by git) that
# the device tool carries: the device image has CUDA, PyTorch and NVIDIA's libraries as pip
# wheels, but no OpenBLAS, Protobuf, Boost, SQLite, GoogleTest or OpenMPI, and nothing can be
# fetched there (docs/cuda/runtime.md, "On a lent GPU").
#
#   gpu-bundle/bin/   ember_gpu_tests, ember_ops_tests, ember_gpu_nccl_tests (where NCCL and MPI were found),
#                     bench_gpu, step_rate (Ember beside PyTorch: bench/gpu_vs_torch.sh), ember (the CLI:
#                     `ember info`), ember_kernel_report (the emulator's report: gpu-check step 10), stripped
#   gpu-bundle/ptxas/ ptxas's logs of the kernel objects (registers, shared memory, spills) for
#                     ember_kernel_report, which gpu-check sets beside Nsight Compute's counters
#   gpu-bundle/lib/   the Ember libraries and every shared library they need that the device
#                     does not provide (ldd says which), stripped; RUNPATH $ORIGIN
#   gpu-bundle/run    the launcher: `gpu-bundle/run PROGRAM ARGS...` finds the vendor libraries
#                     on the device (vendor-libs) and runs bin/PROGRAM; it fails, naming what is
#                     missing, rather than let a program run without one
#   gpu-bundle/vendor-libs   the sonames the device must provide (CUDA runtime, cuBLAS, cuDNN,
#                     NCCL, the driver), one per line
#   gpu-bundle/MANIFEST      commit, build options, CUDA architectures, size
# and the same folder as gpu-bundle.tar.xz, which is what the device tool carries (the folder is
# over its 64 MiB; scripts/gpu-check.sh unpacks the archive on the device). The libraries the
# device's own C library provides (glibc) are never bundled.
#
# Usage: scripts/gpu-bundle.sh [--build-dir DIR] [--skip-build] [--out DIR]
#   --build-dir DIR  build tree (default build-gpu/, configured here with EMBER_CUDA=ON for
#                    sm_80 and sm_90)
#   --skip-build     take DIR as it is (it must hold ember_gpu_checks, bench_gpu, bench_step_rate and ember)
#   --out DIR        where the bundle goes (default gpu-bundle/, and gpu-bundle.tar.xz beside
#                    it); replaced if it is a bundle
#   --with-data      also put the four IDX files of data/mnist (else Debian's Fashion-MNIST,
#                    /usr/share/datasets/fashion-mnist) in data/gpu/, for gpu-check.sh's main job;
#                    the device call then carries data/gpu too (about 30 MB, counted in the limit)
# Environment: EMBER_JOBS (build jobs, default: all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=build-gpu skip_build=0 out=gpu-bundle with_data=0
while (($#)); do
  case "$1" in
    --build-dir) build=${2:?--build-dir needs a directory}; shift ;;
    --skip-build) skip_build=1 ;;
    --with-data) with_data=1 ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    *) echo "gpu-bundle: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
for tool in patchelf strip ldd; do
  command -v $tool >/dev/null || { echo "gpu-bundle: $tool is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done

if ((!skip_build)); then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=80;90" \
    -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_TESTS=ON
  ninja -C "$build" -j "${EMBER_JOBS:-$(nproc)}" ember_gpu_checks bench_gpu bench_step_rate ember ember_kernel_report
fi
cache="$build/CMakeCache.txt"
[[ -f $cache ]] || { echo "gpu-bundle: $build is not a configured build tree" >&2; exit 1; }

programs=("$build/tests/ember_gpu_tests" "$build/tests/ember_ops_tests" "$build/bench/gpu" "$build/bench/step_rate"
  "$build/tools/ember")
[[ -x "$build/tests/ember_gpu_nccl_tests" ]] && programs+=("$build/tests/ember_gpu_nccl_tests")
# The emulator's kernel report, for gpu-check's emulator-vs-ncu step (absent from sanitizer builds).
[[ -x "$build/tests/ember_kernel_report" ]] && programs+=("$build/tests/ember_kernel_report")
for p in "${programs[@]}"; do
  [[ -x $p ]] || { echo "gpu-bundle: $p is missing (build the ember_gpu_checks, bench_gpu, bench_step_rate and ember targets)" >&2; exit 1; }
done
# Not `ldd | grep -q`: under pipefail, grep leaving at its first match can fail the pipeline.
needs=$(ldd "$build/tests/ember_gpu_tests")
if ! grep -q 'libcudart\|libember_core_cuda' <<<"$needs"; then
  echo "gpu-bundle: $build/tests/ember_gpu_tests has no CUDA in it (configure with -DEMBER_CUDA=ON)" >&2
  exit 1
fi

# What the device provides: its C library, and NVIDIA's libraries from its pip wheels and driver.
# Everything else a program needs goes into the bundle.
is_c_library() { [[ $1 =~ ^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libanl)\.so ]]; }
is_vendor() { [[ $1 =~ ^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvJitLink)\.so ]]; }

if [[ -e $out ]]; then
  [[ -f $out/MANIFEST ]] || { echo "gpu-bundle: $out exists and is not a bundle; not replacing it" >&2; exit 1; }
  rm -rf "$out"
fi
mkdir -p "$out/bin" "$out/lib" "$out/ptxas"
declare -A vendor=()
# cuBLAS is opened with dlopen when the first cuBLAS GEMM runs (core/cuda/cublas_api.cpp), so ldd
# does not list it.
vendor[libcublas.so.13]=1
vendor[libcublasLt.so.13]=1
for p in "${programs[@]}"; do
  name=$(basename "$p")
  [[ $name == gpu ]] && name=bench_gpu
  cp "$p" "$out/bin/$name"
  while read -r soname _ path _; do
    [[ -z $soname || $soname == *:* ]] && continue
    soname=${soname##*/}  # /lib64/ld-linux-x86-64.so.2
    if is_c_library "$soname"; then continue; fi
    if is_vendor "$soname"; then
      vendor[$soname]=1
      continue
    fi
    [[ $path == /* && -f $path ]] || { echo "gpu-bundle: $name needs $soname, which ldd cannot find here" >&2; exit 1; }
    [[ -e $out/lib/$soname ]] || cp -L "$path" "$out/lib/$soname"
  done < <(ldd "$p" | sed -E 's/^\s+//; s/ \(0x[0-9a-f]+\)$//')
done
printf '%s\n' "${!vendor[@]}" | sort >"$out/vendor-libs"

chmod u+w "$out"/bin/* "$out"/lib/*
# The kernel report names the emulated kernels from its own symbol table: it keeps it.
for f in "$out"/bin/* "$out"/lib/*; do
  [[ $f == */bin/ember_kernel_report ]] || strip --strip-unneeded "$f" 2>/dev/null || true
done
for f in "$out"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$out"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done

# ptxas's logs, for the kernel report's registers and occupancy (paths kept: the report reads them all).
out_abs=$(cd "$out" && pwd)
(cd "$build" && find . -name '*.ptxas.log' -exec cp --parents {} "$out_abs/ptxas/" \;)
cp "$root/scripts/gpu-bundle-run.sh" "$out/run"
chmod +x "$out/run"
size=$(du -sb "$out" | cut -f1)
{
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "cuda_architectures $(sed -nE 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]+=(.*)/\1/p' "$cache")"
  echo "nvcc $(sed -nE 's/^CMAKE_CUDA_COMPILER:[A-Z]+=(.*)/\1/p' "$cache")"
  echo "programs $(ls "$out/bin" | tr '\n' ' ')"
  echo "bundled_libraries $(ls "$out/lib" | wc -l)"
  echo "size_bytes $size"
} >"$out/MANIFEST"
# What travels is the archive: OpenBLAS alone (every CPU's kernels) is 37 MB and the CUDA
# kernels for two architectures about as much, so the folder is over the device tool's 64 MiB for
# everything it carries, working tree included; xz brings it well under.
archive="${out%/}.tar.xz"
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 >"$archive.tmp" && mv "$archive.tmp" "$archive"
packed=$(stat -c %s "$archive")
tree=$(git -C "$root" ls-files -z 2>/dev/null | (cd "$root" && xargs -0 stat -c %s 2>/dev/null) | awk '{s += $1} END {print s + 0}')
echo "archive_bytes $packed" >>"$out/MANIFEST"
limit=$((64 * 1024 * 1024))
data_bytes=0
if ((with_data)); then
  src=""
  for d in data/mnist /usr/share/datasets/fashion-mnist; do
    if [[ -f $d/train-images-idx3-ubyte || -f $d/train-images-idx3-ubyte.gz ]]; then src=$d; break; fi
  done
  [[ -n $src ]] || { echo "gpu-bundle: --with-data: no MNIST files in data/mnist or /usr/share/datasets/fashion-mnist" >&2; exit 1; }
  rm -rf data/gpu.tmp && mkdir -p data/gpu.tmp
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [[ -f $src/$f.gz ]]; then cp "$src/$f.gz" data/gpu.tmp/; else cp "$src/$f" data/gpu.tmp/; fi
  done
  rm -rf data/gpu && mv data/gpu.tmp data/gpu
  data_bytes=$(du -sb data/gpu | cut -f1)
  echo "gpu-bundle: data/gpu holds $src's four files ($((data_bytes / 1024 / 1024)) MiB); carry it with the archive"
fi
echo "gpu-bundle: $out holds $(ls "$out/bin" | wc -l) programs and $(ls "$out/lib" | wc -l) libraries, $((size / 1024 / 1024)) MiB; $archive is $((packed / 1024 / 1024)) MiB ($packed bytes), the working tree $((tree / 1024 / 1024)) MiB; the device needs: $(tr '\n' ' ' <"$out/vendor-libs")"
if ((packed + tree + data_bytes > limit)); then
  echo "gpu-bundle: $archive ($packed bytes), the working tree ($tree bytes) and data/gpu ($data_bytes bytes) are over the device tool's 64 MiB" >&2
  exit 1
fi
