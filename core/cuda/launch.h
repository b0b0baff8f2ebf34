// The one way kernels are launched (see the project's kernel rules: no `<<<...>>>` in kernel
// files). Under nvcc it is a checked `<<<grid, block, shared, stream>>>`; under the host compiler
// (the kernel emulator, docs/cuda/emulation.md) it runs the grid on fibers, copying the
// arguments once as a launch does, so kernel files are the same in both builds. Include only from
// kernel files (core/cuda/*.cu), after core/cuda/device_api.h.
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/cuda/deferred_check.h"
#include "core/cuda/device_api.h"
#include "core/device.h"
#include "core/error.h"
#include "core/host_waits.h"

#if defined(__CUDACC__)
#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_graph.h"
#include "core/cuda/cuda_stream.h"
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
  emu::run_grid(
      grid, block, shared_bytes, [&] { std::apply(kernel, params); }, reinterpret_cast<const void*>(kernel));
}

// The emulator has one "device": the host.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device) {}
};
#endif

// The stream kernels are launched on: the current stream of the current device
// (core/cuda/cuda_stream.h: the device's compute stream unless a StreamGuard made another one
// current), so that kernels, the caching allocator's stream bookkeeping and the copies agree.
// The emulator runs everything in order on the host and has no streams.
inline cudaStream_t kernel_stream() {
#if defined(__CUDACC__)
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  return raw(current_stream(device));
#else
  return nullptr;
#endif
}

// The device kernels launch on, for scratch tensors of a kernel wrapper that has only raw
// pointers (the current CUDA device; in the emulator its device `emu`, whose memory is host
// memory).
inline Device kernel_device() {
#if defined(__CUDACC__)
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  return Device::cuda(device);
#else
  return Device(DeviceType::Emulated, 0);
#endif
}

// Copies `bytes` from device memory to the host after the work queued on kernel_stream() (a
// kernel wrapper that must report a data error, such as an out-of-range target, reads a flag).
inline void copy_to_host(void* dst, const void* src, size_t bytes) {
  count_host_wait();
#if defined(__CUDACC__)
  cudaStream_t s = kernel_stream();
  refuse_host_wait_in_capture(s, "a kernel's check that reads a device flag on the host (an index range check)");
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
#else
  std::memcpy(dst, src, bytes);
#endif
}

// Reports a data error that the kernels queued so far write into device memory (`bytes` at
// `src`, at most kDeferredCheckBytes) without stalling the host: `raise` receives the bytes and
// throws when they say so. Under nvcc the bytes are copied back asynchronously and `raise` runs
// at the next synchronisation point (core/cuda/deferred_check.h), so the op returns at once and
// the error surfaces a little later; the emulator runs everything in order and raises at once.
inline void check_deferred(const void* src, size_t bytes, const std::function<void(const unsigned char*)>& raise) {
  EMBER_CHECK(bytes <= kDeferredCheckBytes, "check_deferred: ", bytes, " bytes; at most ", kDeferredCheckBytes);
#if defined(__CUDACC__)
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  defer_check(device, kernel_stream(), src, bytes, raise);
#else
  unsigned char buf[kDeferredCheckBytes] = {};
  std::memcpy(buf, src, bytes);
  raise(buf);
#endif
}

}  // namespace ember::cuda
