#!/usr/bin/env bash
# The GPU bundle and the GPU check, as far as a machine without a GPU can take them:
# - scripts/gpu-bundle.sh packs a CUDA build tree into a bundle under the device tool's 64 MiB;
# - the bundle is self-contained: every library any of its programs or libraries needs resolves
#   inside it, or is one the device provides (its C library; NVIDIA's, listed in vendor-libs);
# - its CPU-only parts run with LD_LIBRARY_PATH pointing into the bundle alone (`ember info`);
# - its launcher fails, naming the library, when a vendor library is missing;
# - scripts/gpu-check.sh run from the bundle with the GPU hidden (a stand-in nvidia-smi that finds
#   none, CUDA_VISIBLE_DEVICES empty) runs to its end, exits 0, reports the skips (the main job
#   and the daemon step included), writes its Markdown table and log, and prints the summary last;
#   with no budget left it runs nothing and says so;
# - the ceilings rates are divided by are the detected card's.
# Usage: gpu_check_test.sh <CUDA build dir>
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$here/../../scripts
build=${1:?usage: gpu_check_test.sh <CUDA build dir>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=check_lib.sh
source "$here/check_lib.sh"

bundle=$tmp/bundle
bash "$scripts/gpu-bundle.sh" --build-dir "$build" --skip-build --out "$bundle" >"$tmp/bundle.out" 2>&1
rc=$?
cat "$tmp/bundle.out"
check "gpu-bundle.sh packs the build" test "$rc" -eq 0
if ((rc != 0)); then exit 1; fi
check "the bundle has its programs" test -x "$bundle/bin/ember_gpu_tests" -a -x "$bundle/bin/ember_ops_tests" -a -x "$bundle/bin/bench_gpu" -a -x "$bundle/bin/step_rate" -a -x "$bundle/bin/ember"
check "its archive is under 64 MiB" test "$(stat -c %s "$bundle.tar.xz")" -le $((64 * 1024 * 1024))
check "vendor-libs names cuBLAS and the CUDA runtime" grep -qx "libcublas.so.13" "$bundle/vendor-libs"

# Self-contained: resolve every ELF's needs with nothing but the bundle's RUNPATHs.
unresolved=()
while IFS= read -r f; do
  while read -r soname _ path _; do
    [[ -z $soname || $soname == *:* ]] && continue
    soname=${soname##*/}
    [[ $soname =~ ^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libutil|libresolv|libanl)\.so ]] && continue
    grep -qxF "$soname" "$bundle/vendor-libs" && continue
    [[ $path == /* ]] && path=$(readlink -f "$path")
    [[ $path == "$bundle"/lib/* ]] || unresolved+=("$(basename "$f"): $soname => $path")
  done < <(env -u LD_LIBRARY_PATH ldd "$f" 2>/dev/null | sed -E 's/^\s+//; s/ \(0x[0-9a-f]+\)$//')
done < <(find "$bundle/bin" "$bundle/lib" -type f)
check "every needed library resolves inside the bundle or is the device's" test ${#unresolved[@]} -eq 0
((${#unresolved[@]})) && printf '     %s\n' "${unresolved[@]}"
rpath_bad=$(for f in "$bundle"/bin/* "$bundle"/lib/*; do
  r=$(patchelf --print-rpath "$f")
  [[ $r == '$ORIGIN/../lib' || $r == '$ORIGIN' ]] || echo "$f: $r"
done)
check "RUNPATHs are relative to the bundle" test -z "$rpath_bad"
[[ -n $rpath_bad ]] && echo "$rpath_bad"

# The CPU side alone, with the vendor libraries on the path as the launcher would put them.
vendor_path=$(sed -nE 's/^  [^ ]+ => (.*)\/[^/]+$/\1/p' < <("$bundle/run" --check 2>/dev/null) | sort -u | paste -sd:)
env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$bundle/lib${vendor_path:+:$vendor_path}" "$bundle/bin/ember" info >"$tmp/info" 2>&1
check "ember info runs from the bundle" grep -q "level in use" "$tmp/info"
# The emulator's report travels with ptxas's logs and compares with an ncu CSV from there (a
# synthetic one: the format is ncu's, the counts made up; occupancy comes from the bundled logs).
check "the bundle has the kernel report and ptxas's logs" test -x "$bundle/bin/ember_kernel_report" -a \
  -n "$(find "$bundle/ptxas" -name '*.ptxas.log' | head -n1)"
env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$bundle/lib${vendor_path:+:$vendor_path}" "$bundle/bin/ember_kernel_report" \
  --compare-ncu "$here/fixtures/ncu_sgemm_synthetic.csv" --ptxas "$bundle/ptxas" --cases "mm f32 256x256x256 B^T" \
  >"$tmp/compare" 2>&1
rc=$?
check "a figure off by more than 10% fails the comparison (exit 1)" test "$rc" -eq 1
check "... whose row sets the emulator beside ncu, occupancy from the bundled ptxas logs" \
  grep -qF "| 16.00 / 16.00 | 16.00 / 16.00 | 1.18 / 4.00 | 1.00 / 1.00 | 25.00 / 25.00 | 23.50 | NO: smem ld wf/req |" "$tmp/compare"

# A missing vendor library stops the launcher, named.
cp -r "$bundle" "$tmp/broken"
echo "libember_absent_vendor.so.7" >>"$tmp/broken/vendor-libs"
"$tmp/broken/run" ember info >"$tmp/broken.out" 2>&1
rc=$?
check "a missing vendor library is an error (exit 3)" test "$rc" -eq 3
check "... that names it" grep -q "lacks libember_absent_vendor.so.7" "$tmp/broken.out"

# The check itself, the GPU hidden.
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' >"$tmp/nvidia-smi"
chmod +x "$tmp/nvidia-smi"
# From the archive, as the device call runs it.
PATH="$tmp:$PATH" CUDA_VISIBLE_DEVICES="" bash "$scripts/gpu-check.sh" --bundle "$bundle.tar.xz" --out "$tmp/out" --quick \
  >"$tmp/check.out" 2>&1
rc=$?
check "gpu-check exits 0 without a GPU" test "$rc" -eq 0
check "says no GPU was found" grep -q "no GPU found" "$tmp/check.out"
check "the vendor libraries are found" grep -qE "vendor libraries +\| all found" "$tmp/check.out"
check "the smoke test reports the skip" grep -qE "smoke +\| skipped: no CUDA device" "$tmp/check.out"
check "the op table reports the skip" grep -qE "op table +\| skipped: no CUDA device" "$tmp/check.out"
check "the GPU-only tests report the skip" grep -qE "gpu ops +\| skipped: no CUDA device" "$tmp/check.out"
check "the main job is not run without a GPU" grep -qE "main job +\| not run: no working GPU" "$tmp/check.out"
check "nor the daemon" grep -qE "daemon +\| not run: no working GPU" "$tmp/check.out"
check "the sanitizer is not run without a GPU" grep -qE "compute-sanitizer +\| not run: no working GPU" "$tmp/check.out"
check "bench_gpu reports the skip" grep -qE "bench_gpu +\| skipped: no CUDA device" "$tmp/check.out"
check "the Markdown table is written" grep -qE "^\| smoke +\| skipped" "$tmp/out/gpu-check.md"
check "the log holds everything" grep -q "gpu-check summary" "$tmp/out/gpu-check.log"
check "Ember beside PyTorch is not run without a GPU" grep -qE "vs PyTorch +\| not run: no working GPU" "$tmp/check.out"
check "the summary table is last" bash -c "tail -n1 '$tmp/check.out' | grep -qE '^\| (sgemm tiles|ncu, sgemm tiles) '"

PATH="$tmp:$PATH" CUDA_VISIBLE_DEVICES="" bash "$scripts/gpu-check.sh" --bundle "$bundle" --out "$tmp/out0" --budget 0 \
  >"$tmp/check0.out" 2>&1
rc=$?
check "with no budget left it fails" test "$rc" -ne 0
check "... and says the steps were not run" grep -qE "smoke +\| not run: budget spent" "$tmp/check0.out"
bash "$scripts/gpu-check.sh" --bundle "$bundle" --out "$tmp/o3" --data "$tmp" >"$tmp/data.out" 2>&1
rc=$?
check "--data without the MNIST files is refused" test "$rc" -eq 2
check "... naming the folder" grep -q -- "--data $tmp holds no train-images-idx3-ubyte" "$tmp/data.out"
check "an unknown flag is refused" bash -c "! bash '$scripts/gpu-check.sh' --bogus 2>/dev/null"
check "a missing bundle is refused" bash -c "! bash '$scripts/gpu-check.sh' --bundle '$tmp/none' --out '$tmp/o2' 2>/dev/null"
# Rates are fractions of the detected card's ceiling (the check once divided every card's rates
# by the H200's 67 TFLOP/s); an unknown card gets no fraction.
check "the H100 PCIe's FP32 ceiling is its own" test "$(bash "$scripts/gpu-check.sh" --ceilings "NVIDIA H100 PCIe" | cut -d' ' -f1)" = 51
check "the H200's is 67 TFLOP/s" test "$(bash "$scripts/gpu-check.sh" --ceilings "NVIDIA H200" | cut -d' ' -f1)" = 67
check "an unknown card has none" test -z "$(bash "$scripts/gpu-check.sh" --ceilings "Tesla T4")"
check "the H200's BF16 dense tensor-core ceiling is 989 TFLOP/s" \
  test "$(bash "$scripts/gpu-check.sh" --ceilings "NVIDIA H200" | cut -d' ' -f4)" = 989
check "no fixed ceiling is left in the rate column" bash -c "! grep -nE '/ *67\\b' '$scripts/gpu-check.sh'"
if ((failures)); then
  echo "---- gpu-check.sh output:"
  cat "$tmp/check.out"
  exit 1
fi
