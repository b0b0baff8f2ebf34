// Per-device kernel tables. An op (core/ops/*.cpp) checks its arguments once and then calls
// `stub(device)(...)`; CPU kernels and, when built, CUDA kernels register themselves into the
// same stub at static-initialisation time, so a backend plugs in without touching op code.
// The libraries are shared objects, so every registration in them runs at load time.
#pragma once

#include "core/device.h"
#include "core/error.h"

namespace ember {

template <typename Fn>
struct DispatchStub {
  const char* name;
  Fn* table[kNumDeviceTypes] = {};

  explicit constexpr DispatchStub(const char* n) : name(n) {}

  Fn* operator()(Device d) const {
    Fn* f = table[static_cast<int>(d.type)];
    EMBER_CHECK(f, name, ": no kernel registered for device ", d);
    return f;
  }
  bool has(DeviceType t) const { return table[static_cast<int>(t)] != nullptr; }
};

}  // namespace ember

#define EMBER_DECLARE_STUB(stub, fn_type) extern ::ember::DispatchStub<fn_type> stub
#define EMBER_DEFINE_STUB(stub, fn_type) \
  ::ember::DispatchStub<fn_type> stub {  \
#stub                                \
  }
#define EMBER_REGISTER_KERNEL(stub, device_type, fn)                        \
  [[maybe_unused]] static const bool stub##_registered_##device_type = [] { \
    stub.table[static_cast<int>(::ember::DeviceType::device_type)] = (fn);  \
    return true;                                                            \
  }()
