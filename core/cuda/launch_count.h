// How many kernels Ember has launched in this process (through core/cuda/launch.h), for the
// "kernel launches per training step" line of bench/gpu. Launches made inside cuBLAS and cuDNN
// are not counted. Plain C++: benchmarks include it without the CUDA headers.
#pragma once

#include <cstdint>

namespace ember::cuda {

uint64_t kernel_launch_count();

namespace detail {
void count_launch();
}  // namespace detail

}  // namespace ember::cuda
