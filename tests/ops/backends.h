// The backends the op table runs on, in three groups that are each one ctest entry (a CPU level
// is chosen once per process only by default: the group switches levels itself):
//   cpu   every CPU capability level this build has (a level this CPU lacks is skipped)
//   emu   the emulated CUDA device (core/cuda/emu/emu_device.h) in forward, reverse and seeded
//         random thread order
//   cuda  a real GPU with Ember's own kernels and with cuBLAS/cuDNN (skipped without a GPU)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/device.h"

namespace ember::ops_test {

struct Backend {
  std::string name;   // cpu_avx2, emu_reverse, cuda_vendor
  std::string group;  // cpu, emu, cuda
  Device device;
  std::function<std::string()> unavailable;  // why it cannot run here ("no CUDA device"); empty when it can
  std::function<void()> enter;               // makes it current
  std::function<void()> leave;
};

const std::vector<Backend>& all_backends();
std::vector<const Backend*> backends_of(const std::string& group);

// Out-of-bounds writes the guarded allocators found since the last call (CPU and emulated).
std::vector<std::string> take_guard_violations();

}  // namespace ember::ops_test
