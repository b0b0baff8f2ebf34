// The one way kernels are launched (see the project's kernel rules: no `<<<...>>>` in kernel
// files). Under nvcc it is a checked `<<<grid, block, shared, stream>>>`; under the host compiler
// (the kernel emulator, docs/KERNELS-EMULATION.md) it runs the grid on fibers, copying the
// arguments once as a launch does, so kernel files are the same in both builds. Include only from
// kernel files (core/cuda/*.cu), after core/cuda/device_api.h.
#pragma once

#include <cstddef>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/cuda/device_api.h"
#include "core/device.h"

#if defined(__CUDACC__)
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/launch_count.h"
#endif

namespace ember::cuda {

#if defined(__CUDACC__)
template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            Args&&... args) {
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  EMBER_CUDA_CHECK_LAUNCH();
  detail::count_launch();
}
#else
template <typename... KernelArgs, typename... Args>
void launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t /*stream*/,
            Args&&... args) {
  // One copy of the parameters, as in the launch's parameter buffer; each thread then receives
  // its own by-value copies through std::apply.
  std::tuple<std::decay_t<KernelArgs>...> params(std::forward<Args>(args)...);
  emu::run_grid(grid, block, shared_bytes, [&] { std::apply(kernel, params); });
}

// The emulator has one "device": the host.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device) {}
};
#endif

// Copies `bytes` from device memory to the host after the work queued on kernel_stream() (a
// kernel wrapper that must report a data error, such as an out-of-range target, reads a flag).
inline void copy_to_host(void* dst, const void* src, size_t bytes) {
#if defined(__CUDACC__)
  EMBER_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
#else
  std::memcpy(dst, src, bytes);
#endif
}

// The stream kernels are launched on: the legacy default stream until the backend's per-device
// streams exist (then this becomes the current compute stream of the current device).
inline cudaStream_t kernel_stream() {
  return nullptr;
}

}  // namespace ember::cuda
