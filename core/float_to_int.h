// Floating point to integer conversion, shared by the CPU and CUDA cast kernels: truncation toward
// zero, NaN to 0, and values beyond the integer's range to its nearest bound (what CUDA's cvt.rzi
// instructions do). A plain static_cast is undefined behaviour out of range, and in practice gave
// different integers at different CPU capability levels and compilers (x86's scalar cvttss2si
// returns INT_MIN, vector code wraps through int32), so the same cast must not be left to the
// compiler.
#pragma once

#include <type_traits>

#include "core/host_device.h"

namespace ember {

template <typename To, typename From>
EMBER_HOST_DEVICE_FN To float_to_int(From v) {
  static_assert(std::is_integral_v<To> && !std::is_same_v<To, bool> && std::is_floating_point_v<From>);
  // The integer's bounds, spelled without std::numeric_limits (its functions are host-only for
  // nvcc). As From, the minimum (0 or -2^k) is exact; the maximum rounds up to 2^k for the wide
  // types, so v >= it is out of range, and below it static_cast is an exact truncation.
  using U = std::make_unsigned_t<To>;
  constexpr U umax = static_cast<U>(~U(0));
  constexpr To max = std::is_signed_v<To> ? static_cast<To>(umax >> 1) : static_cast<To>(umax);
  constexpr To min = std::is_signed_v<To> ? static_cast<To>(-max - 1) : To(0);
  if (v != v) return To(0);
  if (v <= static_cast<From>(min)) return min;
  if (v >= static_cast<From>(max)) return max;
  return static_cast<To>(v);
}

}  // namespace ember
