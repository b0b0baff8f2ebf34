// float16 and bfloat16 as CUDA kernels see them: raw uint16_t bits, converted by the integer code
// of core/half_bits.h that the host types use too, so the CPU, the GPU and the kernel emulator
// convert identically; and cast_element, the kernels' version of core/copy.h's conversions.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/cuda/device_api.h"
#include "core/dtype.h"
#include "core/float_to_int.h"
#include "core/half_bits.h"

namespace ember::cuda {

// One definition of the conversions for host and device (core/half_bits.h).
using ::ember::bf16_bits_to_float;
using ::ember::bits_as_float;
using ::ember::float_as_bits;
using ::ember::float_to_bf16_bits;
using ::ember::float_to_half_bits;
using ::ember::half_bits_to_float;

// float16 / bfloat16 elements as kernels see them: raw bits (ember::Half and ember::BFloat16
// convert through host code).
struct HalfBits {
  uint16_t bits;
};
struct BF16Bits {
  uint16_t bits;
};

// The kernel-side element type of a host element type.
template <typename T>
struct KernelType {
  using type = T;
};
template <>
struct KernelType<Half> {
  using type = HalfBits;
};
template <>
struct KernelType<BFloat16> {
  using type = BF16Bits;
};
template <typename T>
using kernel_t = typename KernelType<T>::type;

template <typename T>
EMBER_DEVICE float to_float(T v) {
  return static_cast<float>(v);
}
template <>
EMBER_DEVICE float to_float(HalfBits v) {
  return half_bits_to_float(v.bits);
}
template <>
EMBER_DEVICE float to_float(BF16Bits v) {
  return bf16_bits_to_float(v.bits);
}

// core/copy.h's cast_value for kernels: float -> int truncates and saturates, NaN -> 0
// (core/float_to_int.h), -> bool is != 0, half and bfloat16 through float.
template <typename To, typename From>
EMBER_DEVICE To cast_element(From v) {
  constexpr bool from_16 = std::is_same_v<From, HalfBits> || std::is_same_v<From, BF16Bits>;
  if constexpr (std::is_same_v<To, bool>) {
    return to_float(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, HalfBits>) {
    return HalfBits{float_to_half_bits(to_float(v))};
  } else if constexpr (std::is_same_v<To, BF16Bits>) {
    return BF16Bits{float_to_bf16_bits(to_float(v))};
  } else if constexpr (from_16) {
    return cast_element<To>(to_float(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return ::ember::float_to_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember::cuda
