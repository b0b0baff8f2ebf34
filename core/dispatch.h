// Per-device kernel tables. An op (core/ops/*.cpp) checks its arguments once and then calls
// `stub(device)(...)`; CPU kernels and, when built, CUDA kernels register themselves into the
// same stub at static-initialisation time, so a backend plugs in without touching op code.
// The libraries are shared objects, so every registration in them runs at load time.
//
// The CPU has one slot per capability level (core/cpu_capability.h): every cpu/ folder is compiled
// once per level and each copy registers itself with EMBER_REGISTER_CPU_KERNEL under its own level.
// A CPU call takes the chosen level's kernel, or the nearest lower level's where a kernel exists
// only there.
#pragma once

#include "core/cpu_capability.h"
#include "core/device.h"
#include "core/error.h"

namespace ember {

template <typename Fn>
struct DispatchStub {
  const char* name;
  Fn* table[kNumDeviceTypes] = {};    // the CPU's entry is unused: see cpu
  Fn* cpu[kNumCpuCapabilities] = {};  // by CpuCapability

  explicit constexpr DispatchStub(const char* n) : name(n) {}

  Fn* operator()(Device d) const {
    if (d.type == DeviceType::CPU) return cpu_kernel();
    Fn* f = table[static_cast<int>(d.type)];
    EMBER_CHECK(f, name, ": no kernel registered for device ", d);
    return f;
  }
  // The CPU kernel of the level in force (Native is a level of its own, not above avx512).
  Fn* cpu_kernel() const {
    const int level = detail::cpu_capability_index();
    if (level >= 0) {
      if (cpu[level]) return cpu[level];
      if (level != static_cast<int>(CpuCapability::Native))
        for (int l = level - 1; l >= 0; --l)
          if (cpu[l]) return cpu[l];
    }
    detail::fail_no_cpu_kernel(name);
  }
  bool has(DeviceType t) const {
    if (t == DeviceType::CPU) {
      for (Fn* f : cpu)
        if (f) return true;
      return false;
    }
    return table[static_cast<int>(t)] != nullptr;
  }
};

}  // namespace ember

#define EMBER_DECLARE_STUB(stub, fn_type) extern ::ember::DispatchStub<fn_type> stub
#define EMBER_DEFINE_STUB(stub, fn_type) \
  ::ember::DispatchStub<fn_type> stub {  \
#stub                                \
  }
#define EMBER_REGISTER_KERNEL(stub, device_type, fn)                                              \
  static_assert(::ember::DeviceType::device_type != ::ember::DeviceType::CPU,                     \
                "CPU kernels live in a cpu/ folder and register with EMBER_REGISTER_CPU_KERNEL"); \
  [[maybe_unused]] static const bool stub##_registered_##device_type = [] {                       \
    stub.table[static_cast<int>(::ember::DeviceType::device_type)] = (fn);                        \
    return true;                                                                                  \
  }()
// In a cpu/ folder's .cpp, compiled once per level: EMBER_CPU_LEVEL is that copy's CpuCapability.
#define EMBER_REGISTER_CPU_KERNEL(stub, fn)                       \
  [[maybe_unused]] static const bool stub##_registered_cpu = [] { \
    stub.cpu[EMBER_CPU_LEVEL] = (fn);                             \
    return true;                                                  \
  }()
