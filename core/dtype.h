// Element types and the helpers that map them to C++ types. float16 and bfloat16 are storage
// types: they convert to and from float, and CPU math on them happens in float.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

#include "core/error.h"

namespace ember {

enum class DType : uint8_t { Float32, Float64, Int32, Int64, UInt8, Bool, Float16, BFloat16 };
inline constexpr int kNumDTypes = 8;

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT(google-explicit-constructor): mirrors the builtin conversions
  operator float() const;
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f);  // NOLINT(google-explicit-constructor)
  operator float() const;
};

size_t itemsize(DType t);
const char* dtype_name(DType t);
bool is_floating(DType t);  // float32/64/16, bfloat16
bool is_integral(DType t);  // int32/64, uint8, bool
// Type promotion for binary ops, as in PyTorch for tensor-tensor operands of the same category.
DType promote_types(DType a, DType b);

std::ostream& operator<<(std::ostream& os, DType t);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::Int32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::UInt8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::Float16;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::BFloat16;
}

}  // namespace ember

// Runs the body with `scalar_t` bound to the C++ type of `dt`. The _FLOAT variant covers the
// types CPU math kernels compute in (float32/float64); _ALL adds the integer types and bool.
#define EMBER_DT_CASE(enum_name, type, ...) \
  case ::ember::DType::enum_name: {         \
    using scalar_t = type;                  \
    __VA_ARGS__();                          \
    break;                                  \
  }

#define EMBER_DISPATCH_FLOAT(dt, opname, ...)                                                                       \
  do {                                                                                                              \
    switch (dt) {                                                                                                   \
      EMBER_DT_CASE(Float32, float, __VA_ARGS__)                                                                    \
      EMBER_DT_CASE(Float64, double, __VA_ARGS__)                                                                   \
      default:                                                                                                      \
        EMBER_FAIL(opname, ": dtype ", ::ember::dtype_name(dt), " is not supported (expected float32 or float64)"); \
    }                                                                                                               \
  } while (0)

#define EMBER_DISPATCH_NUMERIC(dt, opname, ...)                                       \
  do {                                                                                \
    switch (dt) {                                                                     \
      EMBER_DT_CASE(Float32, float, __VA_ARGS__)                                      \
      EMBER_DT_CASE(Float64, double, __VA_ARGS__)                                     \
      EMBER_DT_CASE(Int32, int32_t, __VA_ARGS__)                                      \
      EMBER_DT_CASE(Int64, int64_t, __VA_ARGS__)                                      \
      EMBER_DT_CASE(UInt8, uint8_t, __VA_ARGS__)                                      \
      default:                                                                        \
        EMBER_FAIL(opname, ": dtype ", ::ember::dtype_name(dt), " is not supported"); \
    }                                                                                 \
  } while (0)

#define EMBER_DISPATCH_ALL(dt, opname, ...)                   \
  do {                                                        \
    switch (dt) {                                             \
      EMBER_DT_CASE(Float32, float, __VA_ARGS__)              \
      EMBER_DT_CASE(Float64, double, __VA_ARGS__)             \
      EMBER_DT_CASE(Int32, int32_t, __VA_ARGS__)              \
      EMBER_DT_CASE(Int64, int64_t, __VA_ARGS__)              \
      EMBER_DT_CASE(UInt8, uint8_t, __VA_ARGS__)              \
      EMBER_DT_CASE(Bool, bool, __VA_ARGS__)                  \
      EMBER_DT_CASE(Float16, ::ember::Half, __VA_ARGS__)      \
      EMBER_DT_CASE(BFloat16, ::ember::BFloat16, __VA_ARGS__) \
    }                                                         \
  } while (0)
