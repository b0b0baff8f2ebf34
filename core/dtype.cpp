#include "core/dtype.h"

#include "core/half_bits.h"

namespace ember {

Half::Half(float f) : bits(float_to_half_bits(f)) {}
Half::operator float() const {
  return half_bits_to_float(bits);
}

BFloat16::BFloat16(float f) : bits(float_to_bf16_bits(f)) {}
BFloat16::operator float() const {
  return bf16_bits_to_float(bits);
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
