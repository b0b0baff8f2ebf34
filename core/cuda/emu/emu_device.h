// The test-only device `emu` (DeviceType::Emulated): the kernel emulator's CUDA kernels as a
// device that ops and autograd run on end to end. Its memory is host memory from a
// GuardedAllocator (guard zones checked at free, or exact-size blocks under AddressSanitizer), its
// copies mirror the CUDA backend's (core/cuda/copy.cpp) with memcpy for the transfers, and its
// streams run in order. Linked into test programs only (ember_kernels_emu).
#pragma once

#include "core/cuda/emu/guarded_allocator.h"
#include "core/device.h"

namespace ember::emu {

inline Device device() {
  return Device(DeviceType::Emulated, 0);
}
// The device's allocator (registered for DeviceType::Emulated when the program starts).
GuardedAllocator& device_allocator();

}  // namespace ember::emu
