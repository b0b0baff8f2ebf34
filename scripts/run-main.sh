#!/usr/bin/env bash
# Sets up, builds and runs Ember's main job: the demo that trains a small network and prints its
# falling loss (the MNIST example takes its place once it exists). Arguments go to the program.
#   EMBER_JOBS=N   parallel compile jobs (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_EXAMPLES=ON
ninja -C build -j "${EMBER_JOBS:-2}" demo_mlp
exec build/examples/demo_mlp "$@"
