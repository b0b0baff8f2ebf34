#!/usr/bin/env bash
# Installs the Debian 12 packages that building Ember, its tests and its examples need. Safe to
# run again: when everything is already installed it touches nothing (no apt-get, no network).
# Runs as root, or through sudo as another user. Then the Python packages the interop tests read
# Ember's ONNX models and TensorBoard logs back with go into a virtual environment, .venv/ in the
# checkout. The CUDA toolkit is not a Debian 12 package
# here; the build uses one when it finds it (see README.md) and is CPU-only otherwise.
set -euo pipefail

packages=(
  # build
  cmake                    # >= 3.25
  ninja-build
  g++                      # C++20; its libgomp is the OpenMP runtime
  clang                    # the second compiler CI builds with (clang 14 on Debian 12)
  libomp-dev               # clang's OpenMP runtime
  pkg-config
  ccache                   # optional speed-up, used when present
  # core: GEMM through the OpenMP build of OpenBLAS, sharing Ember's OpenMP threads
  libopenblas-openmp-dev
  # tests (GoogleTest and GoogleMock, run by ctest)
  libgtest-dev
  libgmock-dev
  # proto/: model files, checkpoints and job specs
  libprotobuf-dev
  protobuf-compiler
  # data/: gzip'ed IDX files, images through stb_image, and an MNIST-format data set shipped
  # as a Debian package (/usr/share/datasets/fashion-mnist) for examples and tests
  zlib1g-dev
  libstb-dev
  dataset-fashion-mnist
  # data/ text corpora for the LSTM examples: fortune cookies in English, German, Italian and
  # Spanish (lstm_lm trains on the English ones, bilstm_classify tells the four apart)
  fortunes
  fortunes-de
  fortunes-it
  fortunes-es
  # data/ loader and scheduler coroutines
  libboost-context-dev
  # scheduler/: job queue and history
  libsqlite3-dev
  # scheduler/: the integer-programming placement policy (CBC)
  coinor-libcbc-dev
  # bench/: optional reference for the benchmarks (bench/layers compares with libtorch when found)
  libtorch-dev
  # scheduler/parallel: data-parallel training over MPI ranks (mpirun, libmpi), `ember launch`
  libopenmpi-dev
  openmpi-bin
  # tests/slurm: a real Slurm controller and node daemon started by the tests themselves (training
  # under sbatch/srun); their system services are not started by this install (below)
  slurmctld
  slurmd
  slurm-client
  munge
  # scripts/gpu-bundle.sh: the GPU bundle's libraries find each other through relative RPATHs
  patchelf
  # interop tests: a virtual environment for ONNX's checker and onnxruntime (below)
  python3-venv
)

missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]]; then
    missing+=("$p")
  fi
done
install_debian_packages() {
  local sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # Slurm's and munge's packages would start their services (with no cluster configured, slurmd
  # fails and munged runs for nothing): a policy-rc.d that forbids starting services, for the
  # length of the install only, and only where the machine has none of its own.
  local policy=/usr/sbin/policy-rc.d own_policy=0
  if [[ ! -e $policy ]]; then
    own_policy=1
    printf '#!/bin/sh\n# scripts/setup.sh: no service starts while it installs packages\nexit 101\n' |
      "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
  fi
  local status=0
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    status=$?
  if ((own_policy)); then "${sudo[@]}" rm -f "$policy"; fi
  return $status
}
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} Debian packages are installed"
else
  install_debian_packages
fi

# The interop tests' Python side (tests/interop): ONNX's checker and onnxruntime read the models
# Ember exports, TensorBoard's own reader its event files (and `tensorboard --logdir` shows them). Pinned, so that a test's verdict does not change with a new release.
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
python_packages=(numpy==2.4.6 onnx==1.23.2 onnxruntime==1.32.0 tensorboard==2.21.0)
if "$venv/bin/python3" -c "import numpy, onnx, onnxruntime, tensorboard" 2>/dev/null; then
  echo "setup: the Python packages are installed in $venv"
else
  echo "setup: installing ${python_packages[*]} into $venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}"
fi
