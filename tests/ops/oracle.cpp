#include "oracle.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/ops.h"

namespace ember::ops_test {
namespace {

// v rounded to a binary format with a p-bit significand, smallest normal exponent emin and largest
// finite value max_finite, to nearest even (nearbyint in the default rounding mode); beyond the
// largest finite value after rounding, an infinity.
double round_to_format(double v, int p, int emin, double max_finite) {
  if (std::isnan(v) || std::isinf(v) || v == 0.0) return v;
  int e = 0;
  (void)std::frexp(v, &e);  // |v| = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  const int lead = std::max(e - 1, emin);
  const double quantum = std::ldexp(1.0, lead - (p - 1));
  const double r = std::nearbyint(v / quantum) * quantum;
  if (std::abs(r) > max_finite) return std::copysign(INFINITY, v);
  return r;
}

double to_half(double v) {
  return round_to_format(static_cast<float>(v), 11, -14, 65504.0);
}
double to_bfloat16(double v) {
  return round_to_format(static_cast<float>(v), 8, -126, 3.3895313892515355e38);
}

uint16_t half_bits_of(double h) {  // h on the float16 grid
  const uint16_t sign = std::signbit(h) ? 0x8000 : 0;
  const double a = std::abs(h);
  if (std::isnan(h)) return sign | 0x7e00;
  if (std::isinf(h)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a / std::ldexp(1.0, -24));
  int e = 0;
  (void)std::frexp(a, &e);
  const int lead = e - 1;
  const auto mant = static_cast<uint16_t>((a / std::ldexp(1.0, lead) - 1.0) * 1024.0);
  return sign | static_cast<uint16_t>((lead + 15) << 10) | mant;
}

template <typename T>
T saturated(double v) {
  if (std::isnan(v)) return 0;
  const double lo = static_cast<double>(std::numeric_limits<T>::min());
  const double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);  // max + 1, exact
  if (v <= lo) return std::numeric_limits<T>::min();
  if (v >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(std::trunc(v));
}

}  // namespace

std::vector<uint64_t> element_bits(const Tensor& t) {
  const size_t size = t.itemsize();
  const auto* base = static_cast<const unsigned char*>(t.raw_data());
  const int64_t n = t.numel(), d = t.dim();
  std::vector<uint64_t> out;
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> index(static_cast<size_t>(d), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t at = 0;
    for (int64_t k = 0; k < d; ++k) at += index[static_cast<size_t>(k)] * t.stride(k);
    uint64_t w = 0;
    std::memcpy(&w, base + at * static_cast<int64_t>(size), size);
    out.push_back(w);
    for (int64_t k = d - 1; k >= 0; --k) {
      if (++index[static_cast<size_t>(k)] < t.size(k)) break;
      index[static_cast<size_t>(k)] = 0;
    }
  }
  return out;
}

Tensor words_of(const std::vector<uint64_t>& bits, DType dt) {
  std::vector<int64_t> words;
  for (uint64_t b : bits) {
    words.push_back(static_cast<int64_t>(b & 0xffffffffu));
    if (itemsize(dt) == 8) words.push_back(static_cast<int64_t>(b >> 32));
  }
  return from_vector<int64_t>(words, {static_cast<int64_t>(words.size())});
}

double value_of(uint64_t bits, DType dt) {
  switch (dt) {
    case DType::Float64:
      return std::bit_cast<double>(bits);
    case DType::Float32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DType::BFloat16:
      return std::bit_cast<float>(static_cast<uint32_t>(bits << 16));
    case DType::Float16: {
      const double sign = bits & 0x8000 ? -1.0 : 1.0;
      const int e = static_cast<int>((bits >> 10) & 0x1f);
      const double mant = static_cast<double>(bits & 0x3ff);
      if (e == 31) return mant != 0 ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
      if (e == 0) return sign * std::ldexp(mant, -24);
      return sign * std::ldexp(1.0 + mant / 1024.0, e - 15);
    }
    default:
      return static_cast<double>(int_of(bits, dt));
  }
}

int64_t int_of(uint64_t bits, DType dt) {
  switch (dt) {
    case DType::Int64:
      return static_cast<int64_t>(bits);
    case DType::Int32:
      return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DType::UInt8:
      return static_cast<uint8_t>(bits);
    case DType::Bool:
      return (bits & 0xff) != 0;
    default:
      return static_cast<int64_t>(value_of(bits, dt));
  }
}

double converted(double v, DType dt) {
  switch (dt) {
    case DType::Float64:
      return v;
    case DType::Float32:
      return static_cast<float>(v);
    case DType::Float16:
      return to_half(v);
    case DType::BFloat16:
      return to_bfloat16(v);
    case DType::Bool:
      return static_cast<float>(v) != 0.0f ? 1.0 : 0.0;
    case DType::UInt8:
      return saturated<uint8_t>(v);
    case DType::Int32:
      return saturated<int32_t>(v);
    case DType::Int64:
      return static_cast<double>(saturated<int64_t>(v));
  }
  return v;
}

uint64_t bits_of(double v, DType dt) {
  const double c = converted(v, dt);
  switch (dt) {
    case DType::Float64:
      return std::bit_cast<uint64_t>(c);
    case DType::Float32:
      return std::bit_cast<uint32_t>(static_cast<float>(c));
    case DType::BFloat16:
      return std::bit_cast<uint32_t>(static_cast<float>(c)) >> 16;
    case DType::Float16:
      return half_bits_of(c);
    case DType::Int64:
      return static_cast<uint64_t>(saturated<int64_t>(v));
    case DType::Int32:
      return static_cast<uint32_t>(static_cast<int32_t>(c));
    default:
      return static_cast<uint64_t>(c);
  }
}

int64_t converted_int(double v, DType dt) {
  if (dt == DType::Int64) return saturated<int64_t>(v);
  return static_cast<int64_t>(converted(v, dt));
}

std::vector<double> element_values(const Tensor& t) {
  std::vector<double> v;
  for (uint64_t b : element_bits(t)) v.push_back(value_of(b, t.dtype()));
  return v;
}

std::vector<int64_t> element_ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (uint64_t b : element_bits(t)) v.push_back(int_of(b, t.dtype()));
  return v;
}

}  // namespace ember::ops_test
