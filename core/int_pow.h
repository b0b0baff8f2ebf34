// Integer power, shared by the CPU and CUDA elementwise kernels: by squaring, wrapping on
// overflow like the other integer ops. Negative exponents follow PyTorch: 1 and -1 have exact
// answers, everything else truncates to 0.
#pragma once

#include <type_traits>

#include "core/host_device.h"

namespace ember {

template <typename T>
EMBER_HOST_DEVICE_FN T int_pow(T base, T exponent) {
  using U = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  U r = 1, b = static_cast<U>(base);
  for (U e = static_cast<U>(exponent); e; e >>= 1) {
    if (e & 1) r = static_cast<U>(r * b);
    b = static_cast<U>(b * b);
  }
  return static_cast<T>(r);
}

}  // namespace ember
