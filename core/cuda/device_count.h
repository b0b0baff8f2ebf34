// How many CUDA devices this process sees. The backend registers a query with core/device.h at
// load time, so ember::cuda_device_count() and Device::best() answer from the real runtime; with
// no GPU, no driver or a driver too old for the runtime, the answer is 0 rather than an error.
#pragma once

namespace ember::cuda {

// GPUs the CUDA runtime reports (0 on any error). Queried once per process.
int physical_device_count();

// GPUs Ember can place tensors on: physical_device_count() once the CUDA allocator is registered,
// 0 before that (a GPU without an allocator cannot hold a tensor, so Device::best() must not pick
// it). This is what ember::cuda_device_count() returns.
int usable_device_count();

}  // namespace ember::cuda
