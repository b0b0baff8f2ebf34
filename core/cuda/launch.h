// The one way kernels are launched (see the project's kernel rules: no `<<<...>>>` in kernel
// files). Today it is a checked `<<<grid, block, shared, stream>>>`; the kernel emulation layer
// will give the same call a CPU implementation, so kernel files need not change. Include only
// from .cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/launch_count.h"

namespace ember::cuda {

template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            Args&&... args) {
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  EMBER_CUDA_CHECK_LAUNCH();
  detail::count_launch();
}

}  // namespace ember::cuda
