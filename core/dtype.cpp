#include "core/dtype.h"

#include <bit>
#include <cmath>

namespace ember {

namespace {
// IEEE binary16 conversion with round-to-nearest-even, subnormals, inf and NaN.
uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent
  return static_cast<uint16_t>(half);
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
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
  return std::bit_cast<float>(out);
}
}  // namespace

Half::Half(float f) : bits(float_to_half_bits(f)) {}
Half::operator float() const {
  return half_bits_to_float(bits);
}

BFloat16::BFloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) {
    bits = static_cast<uint16_t>((x >> 16) | 0x40u);
  } else {
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    bits = static_cast<uint16_t>((x + rounding) >> 16);
  }
}
BFloat16::operator float() const {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

size_t itemsize(DType t) {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::UInt8:
      return 1;
    case DType::Bool:
      return 1;
    case DType::Float16:
      return 2;
    case DType::BFloat16:
      return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::UInt8:
      return "uint8";
    case DType::Bool:
      return "bool";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
bool is_integral(DType t) {
  return !is_floating(t);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool:
        return 0;
      case DType::UInt8:
        return 1;
      case DType::Int32:
        return 2;
      case DType::Int64:
        return 3;
      case DType::Float16:
        return 4;
      case DType::BFloat16:
        return 4;
      case DType::Float32:
        return 5;
      case DType::Float64:
        return 6;
    }
    return 0;
  };
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return rank(a) >= rank(b) ? a : b;
}

std::ostream& operator<<(std::ostream& os, DType t) {
  return os << dtype_name(t);
}

}  // namespace ember
