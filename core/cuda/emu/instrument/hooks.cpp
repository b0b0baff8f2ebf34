// The hooks that the instrumented kernel files call (compiled into the profiled emulator only:
// cmake/EmberKernelEmulation.cmake). The kernels are compiled with the kernel flavour of
// AddressSanitizer's instrumentation, which needs no runtime: with a call threshold of 0 it calls
// __asan_{load,store}N_noabort(address) before every load and store of N bytes, and with
// -fsanitize-coverage=trace-pc __sanitizer_cov_trace_pc() at every basic block. GCC and clang
// emit the same calls. Each hook hands the address and its caller (the instruction's site) to the
// emulator's counters (core/cuda/emu/profile.cpp). A program that links these hooks must not also
// link the real AddressSanitizer, which defines the same names: this file is never built with
// EMBER_SANITIZE.
#include <cstddef>
#include <cstdint>

#include "core/cuda/emu/profile.h"

namespace {
[[maybe_unused]] const bool linked = (ember::emu::profile::detail::g_hooks_linked = true);

inline uintptr_t caller(void* ra) {
  return reinterpret_cast<uintptr_t>(ra);
}
}  // namespace

#define EMBER_EMU_ACCESS_HOOKS(n)                                                          \
  extern "C" void __asan_load##n##_noabort(uintptr_t a) {                                  \
    ember::emu::profile::detail::access(a, n, false, caller(__builtin_return_address(0))); \
  }                                                                                        \
  extern "C" void __asan_store##n##_noabort(uintptr_t a) {                                 \
    ember::emu::profile::detail::access(a, n, true, caller(__builtin_return_address(0)));  \
  }
EMBER_EMU_ACCESS_HOOKS(1)
EMBER_EMU_ACCESS_HOOKS(2)
EMBER_EMU_ACCESS_HOOKS(4)
EMBER_EMU_ACCESS_HOOKS(8)
EMBER_EMU_ACCESS_HOOKS(16)
#undef EMBER_EMU_ACCESS_HOOKS

extern "C" void __asan_loadN_noabort(uintptr_t a, size_t n) {
  ember::emu::profile::detail::access(a, static_cast<unsigned>(n), false, caller(__builtin_return_address(0)));
}
extern "C" void __asan_storeN_noabort(uintptr_t a, size_t n) {
  ember::emu::profile::detail::access(a, static_cast<unsigned>(n), true, caller(__builtin_return_address(0)));
}
// Before a call that does not return (a throw); nothing to do without shadow memory.
extern "C" void __asan_handle_no_return() {}

extern "C" void __sanitizer_cov_trace_pc() {
  ember::emu::profile::detail::basic_block(caller(__builtin_return_address(0)));
}
// Around the dynamic initialisation of a file's globals (odr-violation checks): nothing to do.
extern "C" void __asan_before_dynamic_init(const char*) {}
extern "C" void __asan_after_dynamic_init() {}
