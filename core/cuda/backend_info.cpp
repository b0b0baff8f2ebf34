#include "core/cuda/backend_info.h"

#include <cuda_runtime_api.h>
#include <ember/config.h>

#include "core/cuda/device_count.h"
#include "core/error.h"
#if EMBER_WITH_CUDNN
#include <cudnn.h>
#endif

namespace ember::cuda {

BackendInfo backend_info() {
  BackendInfo info;
  if (cudaRuntimeGetVersion(&info.runtime_version) != cudaSuccess) info.runtime_version = 0;
  if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess) info.driver_version = 0;
  (void)cudaGetLastError();
#if EMBER_WITH_CUDNN
  info.cudnn_version = static_cast<int>(cudnnGetVersion());
#endif
  info.devices = physical_device_count();
  return info;
}

namespace {
std::string cuda_version_str(int v) {
  return v ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) : std::string("none");
}
}  // namespace

std::string describe_backend() {
  const BackendInfo i = backend_info();
  std::string s = "CUDA runtime " + cuda_version_str(i.runtime_version) + ", driver " +
                  cuda_version_str(i.driver_version) + ", cuDNN ";
  if (const int v = i.cudnn_version) {
    // cuDNN 9 encodes its version as major * 10000 + minor * 100 + patch, cuDNN 8 as
    // major * 1000 + minor * 100 + patch.
    const bool v9 = v >= 90000;
    s += std::to_string(v9 ? v / 10000 : v / 1000) + "." + std::to_string(v9 ? v / 100 % 100 : v / 100 % 10) + "." +
         std::to_string(v % 100);
  } else {
    s += "none";
  }
  s += ", " + std::to_string(i.devices) + (i.devices == 1 ? " GPU" : " GPUs");
  return s;
}

DeviceInfo device_info(int device) {
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  (void)cudaGetLastError();
  EMBER_CHECK(e == cudaSuccess, "CUDA device ", device, ": cannot read its properties (", cudaGetErrorString(e), ")");
  return DeviceInfo{prop.name, 10 * prop.major + prop.minor};
}

}  // namespace ember::cuda
