// Integer power, shared by the CPU and CUDA elementwise and unary kernels: by squaring, wrapping
// on overflow like the other integer ops. Negative exponents follow PyTorch: 1 and -1 have exact
// answers, everything else truncates to 0.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/host_device.h"

namespace ember {

// base^exponent modulo 2^bits of T. The exponent is 64-bit so that a scalar exponent (pow with a
// double that is a whole number) keeps every bit, however narrow T is.
template <typename T>
EMBER_HOST_DEVICE_FN T pow_by_squaring(T base, uint64_t exponent) {
  using U = std::make_unsigned_t<T>;
  U r = 1, b = static_cast<U>(base);
  for (uint64_t e = exponent; e; e >>= 1) {
    if (e & 1) r = static_cast<U>(r * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(r);
}

template <typename T>
EMBER_HOST_DEVICE_FN T int_pow(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  return pow_by_squaring(base, static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(exponent)));
}

}  // namespace ember
