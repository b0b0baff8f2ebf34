#!/usr/bin/env bash
# Sets up, builds and runs Ember's main job: the MNIST CNN (examples/mnist_cnn.cpp) for 5 epochs
# with a progress bar, a test-set evaluation after every epoch and checkpoints. It trains on MNIST
# from data/mnist when the four IDX files are there (scripts/download-mnist.sh fetches them where
# the machine is online); otherwise mnist_cnn says so and trains on Fashion-MNIST from Debian's
# dataset-fashion-mnist package, which `scripts/setup.sh main` installs with the rest of what the
# build needs (not the test suite's packages: scripts/test.sh installs those). Arguments go to the program
# (see `build/examples/mnist_cnn --help`), e.g. scripts/run-main.sh --epochs 1. Each run trains
# afresh into runs/mnist_cnn (--overwrite: mnist_cnn refuses to replace a checkpoint otherwise);
# scripts/run-main.sh --resume auto continues the last one instead.
#   EMBER_JOBS=N   parallel compile jobs (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh main
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_EXAMPLES=ON
ninja -C build -j "${EMBER_JOBS:-2}" mnist_cnn
mkdir -p runs/mnist_cnn
fresh=(--overwrite)
for a in "$@"; do
  [[ $a == --resume || $a == --resume=* || $a == --overwrite* ]] && fresh=()
done
exec build/examples/mnist_cnn --checkpoint-dir runs/mnist_cnn --log runs/mnist_cnn/metrics.csv "${fresh[@]}" "$@"
