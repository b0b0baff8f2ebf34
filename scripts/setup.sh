#!/usr/bin/env bash
# Installs the Debian 12 packages Ember needs, in one of two sets, and does nothing when they are
# already installed (no apt-get, no network):
#   scripts/setup.sh main   what building and running the examples needs (scripts/run-main.sh): a
#                           compiler, CMake and Ninja, OpenBLAS, Protobuf, stb, zlib, SQLite (the
#                           `ember` program's job queue) and Fashion-MNIST. Everything else is found
#                           at configure time and reported as optional (CMake's summary).
#   scripts/setup.sh [all]  that, and everything the test suite needs (scripts/test.sh): clang, the
#                           tests' libraries, OpenMPI, CBC, libtorch, a real Slurm and munge,
#                           Chromium (the scheduler dashboard's test), and a Python virtual
#                           environment (.venv/ in the checkout) with the readers the interop tests
#                           check Ember's ONNX models and TensorBoard logs with, and Prometheus's
#                           parser for the scheduler daemon's metrics.
# Runs as root, or through sudo as another user. No system service it installs is started, and none
# is left enabled for the next boot (the tests start their own Slurm and munge): a service the
# machine had before is left as it was. The CUDA toolkit is not a Debian 12 package here; the build
# uses one when it finds it (see README.md) and is CPU-only otherwise.
#   EMBER_SETUP_DRY_RUN=1   print the packages that would be installed and the services that would
#                           be disabled, and change nothing (tests/scripts/setup_test.sh)
set -euo pipefail

mode=${1:-all}
if [[ $mode != main && $mode != all ]]; then
  echo "usage: scripts/setup.sh [main|all]  (main: the examples' build; all, the default: the test suite too)" >&2
  exit 2
fi

main_packages=(
  # build
  cmake                    # >= 3.25
  ninja-build
  g++                      # C++20; its libgomp is the OpenMP runtime
  pkg-config
  ccache                   # optional speed-up, used when present
  # core: GEMM through the OpenMP build of OpenBLAS, sharing Ember's OpenMP threads
  libopenblas-openmp-dev
  # proto/: model files, checkpoints and job specs
  libprotobuf-dev
  protobuf-compiler
  # data/: gzip'ed IDX files, images through stb_image, and an MNIST-format data set shipped
  # as a Debian package (/usr/share/datasets/fashion-mnist) for examples and tests
  zlib1g-dev
  libstb-dev
  dataset-fashion-mnist
  # scheduler/: the job queue and history of the `ember` program, which every build configures
  libsqlite3-dev
)
test_packages=(
  clang                    # the second compiler CI builds with (clang 14 on Debian 12)
  libomp-dev               # clang's OpenMP runtime
  # tests (GoogleTest and GoogleMock, run by ctest)
  libgtest-dev
  libgmock-dev
  # data/ text corpora for the LSTM examples: fortune cookies in English, German, Italian and
  # Spanish (lstm_lm trains on the English ones, bilstm_classify tells the four apart)
  fortunes
  fortunes-de
  fortunes-it
  fortunes-es
  # the kernel emulator's fibres (tests/emu: the CUDA kernels run on the CPU)
  libboost-context-dev
  # scheduler/: the integer-programming placement policy (CBC)
  coinor-libcbc-dev
  # bench/: optional reference for the benchmarks (bench/layers compares with libtorch when found)
  libtorch-dev
  # dist: data-parallel training over MPI ranks (mpirun, libmpi), `ember launch`
  libopenmpi-dev
  openmpi-bin
  # tests/slurm: a real Slurm controller and node daemon started by the tests themselves (training
  # under sbatch/srun); their system services are neither started nor enabled by this install
  slurmctld
  slurmd
  slurm-client
  munge
  # tests/multinode: two hosts on one machine as network namespaces joined by a bridge (`ip netns`;
  # nsenter and unshare come with util-linux, which every Debian has)
  iproute2
  # scripts/gpu-bundle.sh: the GPU bundle's libraries find each other through relative RPATHs
  patchelf
  # interop tests: a virtual environment for ONNX's checker and onnxruntime (below)
  python3-venv
  # tests/scheduler/web: the scheduler daemon's dashboard loaded in a real browser (headless)
  chromium
)
# Packages whose install enables a system service of the same name for the next boot.
services_off=(munge slurmctld slurmd)

packages=("${main_packages[@]}")
if [[ $mode == all ]]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != installed ]]; then
    missing+=("$p")
  fi
done
# The services this run brings in: those of services_off whose package it installs.
new_services=()
for s in "${services_off[@]}"; do
  for p in "${missing[@]}"; do [[ $p == "$s" ]] && new_services+=("$s"); done
done
if [[ ${EMBER_SETUP_DRY_RUN:-0} == 1 ]]; then
  echo "setup ($mode): would install: ${missing[*]:-nothing}"
  echo "setup ($mode): would disable: ${new_services[*]:-nothing}"
  exit 0
fi

sudo=()
if ((${#missing[@]} > 0 && EUID != 0)); then
  if ! command -v sudo >/dev/null; then
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi
install_debian_packages() {
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
# The packages' install scripts enable their services for the next boot (systemd's wants links,
# and sysvinit's rc links); the user asked for none of them. systemctl disables both kinds, and
# works on the unit files whether or not systemd is running; without it, update-rc.d.
disable_new_services() {
  local s
  for s in "${new_services[@]}"; do
    if command -v systemctl >/dev/null; then
      "${sudo[@]}" systemctl disable --quiet "$s.service" >/dev/null 2>&1 || true
    elif [[ -e /etc/init.d/$s ]] && command -v update-rc.d >/dev/null; then
      "${sudo[@]}" update-rc.d "$s" disable >/dev/null 2>&1 || true
    fi
    echo "setup: $s's service is installed but not enabled (the tests start their own)"
  done
}
if ((${#missing[@]} == 0)); then
  echo "setup ($mode): all ${#packages[@]} Debian packages are installed"
else
  install_debian_packages
  disable_new_services
fi
if [[ $mode == main ]]; then exit 0; fi

# The interop tests' Python side (tests/interop): ONNX's checker and onnxruntime read the models
# Ember exports, TensorBoard's own reader its event files (and `tensorboard --logdir` shows them);
# Prometheus's parser reads the scheduler daemon's /metrics (tests/scheduler/web).
# Pinned, so that a test's verdict does not change with a new release.
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
python_packages=(numpy==2.4.6 onnx==1.23.2 onnxruntime==1.32.0 tensorboard==2.21.0 prometheus_client==0.26.0)
if "$venv/bin/python3" -c "import numpy, onnx, onnxruntime, tensorboard, prometheus_client" 2>/dev/null; then
  echo "setup: the Python packages are installed in $venv"
else
  echo "setup: installing ${python_packages[*]} into $venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}"
fi
