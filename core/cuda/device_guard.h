// Makes a CUDA device current for a scope and restores the previous one on exit, so that a kernel
// for a tensor on cuda:1 runs on cuda:1 whatever device the caller had selected.
#pragma once

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"
#include "core/device.h"

namespace ember::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(Device d) {
    EMBER_CUDA_CHECK(cudaGetDevice(&prev_));
    if (d.index != prev_) EMBER_CUDA_CHECK(cudaSetDevice(d.index));
    cur_ = d.index;
  }
  ~DeviceGuard() {
    if (cur_ != prev_) (void)cudaSetDevice(prev_);  // a destructor must not throw
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  int cur_ = 0;
};

}  // namespace ember::cuda
