// float16 and bfloat16 conversions for kernels, bit for bit those of core/dtype.cpp (round to
// nearest even, subnormals, inf, NaN), written as integer code so that the GPU and the kernel
// emulator convert identically. Kernels keep half and bfloat16 values as raw uint16_t bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/cuda/device_api.h"
#include "core/dtype.h"

namespace ember::cuda {

EMBER_DEVICE float bits_as_float(uint32_t x) {
  return __uint_as_float(x);
}
EMBER_DEVICE uint32_t float_as_bits(float f) {
  return __float_as_uint(f);
}

EMBER_DEVICE uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_as_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(half);
}

EMBER_DEVICE float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return bits_as_float(out);
}

EMBER_DEVICE uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_as_bits(f);
  if (f != f) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

EMBER_DEVICE float bf16_bits_to_float(uint16_t b) {
  return bits_as_float(static_cast<uint32_t>(b) << 16);
}

}  // namespace ember::cuda

namespace ember::cuda {

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

// core/copy.h's cast_value for kernels: C++ conversions, -> bool is != 0, half and bfloat16
// through float.
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
    return static_cast<To>(to_float(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember::cuda
