// What the CUDA backend was built with and what it finds at run time: runtime, driver and cuDNN
// versions and the number of GPUs. Programs print it at start-up; tests use it to prove that the
// CUDA libraries are linked and loadable on a machine without a GPU.
#pragma once

#include <string>

namespace ember::cuda {

struct BackendInfo {
  int runtime_version = 0;  // CUDA runtime, as 1000 * major + 10 * minor (13000 = 13.0)
  int driver_version = 0;   // the newest CUDA version the driver supports; 0 when no driver
  int cudnn_version = 0;    // cuDNN's runtime version (91900 = 9.19.0); 0 when built without it
  int devices = 0;          // physical_device_count()
};

BackendInfo backend_info();
// One line, e.g. "CUDA runtime 13.0, driver none, cuDNN 9.19.0, 0 GPUs".
std::string describe_backend();

// A GPU's name and architecture (10 x major + minor compute capability: 90 for an H100 or H200).
struct DeviceInfo {
  std::string name;
  int sm = 0;
};
// An ember::Error naming the device when the runtime cannot describe it (no such device, no GPU).
DeviceInfo device_info(int device);

}  // namespace ember::cuda
