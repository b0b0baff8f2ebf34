// Per-device kernel tables. An op (core/ops/*.cpp) checks its arguments once and then calls
// `stub(device)(...)`; CPU kernels and, when built, CUDA kernels register themselves into the
// same stub at static-initialisation time, so a backend plugs in without touching op code.
// The libraries are shared objects, so every registration in them runs at load time.
//
// The CPU has one slot per capability level (core/cpu_capability.h): every cpu/ folder is compiled
// once per level and each copy registers itself with EMBER_REGISTER_KERNEL(stub, CPU, fn) under its
// own level. A CPU call takes the chosen level's kernel, or the nearest lower level's where a kernel exists
// only there.
#pragma once

#include <vector>

#include "core/cpu_capability.h"
#include "core/device.h"
#include "core/error.h"

namespace ember {

// What the stub registry (below) knows of a stub without its function type.
struct StubInfo {
  const char* name;
  const void* stub;
  bool (*has)(const void* stub, DeviceType t);
};

namespace detail {
// Every stub defined with EMBER_DEFINE_STUB, in registration order (tests list them to check that
// each has a kernel on every backend the build has and a row in the op table).
void register_stub(const StubInfo& info);
// A function the tests install to see which stubs run on which device (null otherwise: one load and
// a branch per op call). `cpu_level` is the CpuCapability whose kernel ran, -1 for other devices.
using DispatchObserver = void (*)(const void* stub, DeviceType t, int cpu_level);
extern DispatchObserver g_dispatch_observer;
}  // namespace detail

// The stubs registered so far (all of them once the libraries are loaded).
std::vector<StubInfo> registered_stubs();
void set_dispatch_observer(detail::DispatchObserver f);

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
    if (detail::g_dispatch_observer) detail::g_dispatch_observer(this, d.type, -1);
    return f;
  }
  // The CPU kernel of the level in force (Native is a level of its own, not above avx512).
  Fn* cpu_kernel() const {
    const int level = detail::cpu_capability_index();
    if (level >= 0) {
      int l = level;
      if (!cpu[l] && level != static_cast<int>(CpuCapability::Native))
        while (l > 0 && !cpu[l]) --l;
      if (cpu[l]) {
        if (detail::g_dispatch_observer) detail::g_dispatch_observer(this, DeviceType::CPU, l);
        return cpu[l];
      }
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
  static bool has_erased(const void* stub, DeviceType t) { return static_cast<const DispatchStub*>(stub)->has(t); }
};

}  // namespace ember

#define EMBER_DECLARE_STUB(stub, fn_type) extern ::ember::DispatchStub<fn_type> stub
#define EMBER_DEFINE_STUB(stub, fn_type)                                                         \
  ::ember::DispatchStub<fn_type> stub{#stub};                                                    \
  [[maybe_unused]] static const bool stub##_listed = [] {                                        \
    ::ember::detail::register_stub({#stub, &stub, &::ember::DispatchStub<fn_type>::has_erased}); \
    return true;                                                                                 \
  }()

// Registering a kernel: the one spelling, for every backend.
//   EMBER_REGISTER_KERNEL(stub, CPU, fn)         in a cpu/ folder's .cpp, compiled once per level:
//                                                fills the slot of that copy's level (EMBER_CPU_LEVEL)
//   EMBER_REGISTER_KERNEL(stub, CUDA, fn)        Ember's CUDA kernel for the stub (a kernel file,
//                                                core/cuda/*.cu), or the native/vendor chooser of a
//                                                family with a cuBLAS/cuDNN side (core/cuda/*_cudnn.cpp)
//   EMBER_REGISTER_KERNEL(stub, CUDA, fn, Family)  Ember's own kernel of such a family
//                                                (KernelFamily::Family), which the chooser runs when
//                                                it picks the native side (core/cuda/native_kernels.h)
// In the kernel emulation build the same kernel files fill the stub's Emulated slot instead
// (core/cuda/device_api.h), so tests run them as the test-only device `emu`.
#define EMBER_REGISTER_KERNEL(...) \
  EMBER_REGISTER_PICK_(__VA_ARGS__, EMBER_REGISTER_4_, EMBER_REGISTER_3_, unused)(__VA_ARGS__)
#define EMBER_REGISTER_PICK_(a, b, c, d, name, ...) name
#define EMBER_REGISTER_3_(stub, backend, fn) EMBER_REGISTER_KERNEL_##backend(stub, fn)
#define EMBER_REGISTER_4_(stub, backend, fn, family) EMBER_REGISTER_KERNEL_##backend##_NATIVE(stub, fn, family)

#define EMBER_REGISTER_KERNEL_CPU(stub, fn)                       \
  [[maybe_unused]] static const bool stub##_registered_cpu = [] { \
    stub.cpu[EMBER_CPU_LEVEL] = (fn);                             \
    return true;                                                  \
  }()
#define EMBER_REGISTER_KERNEL_CUDA(stub, fn) EMBER_REGISTER_IN_SLOT_(stub, CUDA, fn)
// The emulated device's own runtime glue (its copies, core/cuda/emu/emu_device.cpp).
#define EMBER_REGISTER_KERNEL_EMULATED(stub, fn) EMBER_REGISTER_IN_SLOT_(stub, Emulated, fn)
#define EMBER_REGISTER_IN_SLOT_(stub, device_type, fn)                      \
  [[maybe_unused]] static const bool stub##_registered_##device_type = [] { \
    stub.table[static_cast<int>(::ember::DeviceType::device_type)] = (fn);  \
    return true;                                                            \
  }()
