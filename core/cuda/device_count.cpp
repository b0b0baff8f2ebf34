#include "core/cuda/device_count.h"

#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "core/device.h"
#include "core/error.h"

namespace ember::cuda {

int physical_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // cudaErrorNoDevice / InsufficientDriver: a CPU-only machine
      return 0;
    }
    return n;
  }();
  return count;
}

int usable_device_count() {
  try {
    (void)get_allocator(Device::cuda(0));
  } catch (const Error&) {
    return 0;
  }
  return physical_device_count();
}

namespace {
[[maybe_unused]] const bool registered = [] {
  ember::detail::set_cuda_device_count_fn(&usable_device_count);
  return true;
}();
}  // namespace

}  // namespace ember::cuda
