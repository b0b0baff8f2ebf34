// Helpers shared by the elementwise and activation tests: float64 inputs, error expectations,
// closeness against double references with NaN/inf handled.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/ops.h"

namespace ember::test {

inline Tensor f64(std::initializer_list<double> v) {
  return tensor(v, {.dtype = DType::Float64});
}

inline Tensor randn64(Shape s, uint64_t seed) {
  Generator g(seed);
  return randn(std::move(s), {.dtype = DType::Float64}, &g);
}

// Uniform in [lo, hi), float64.
inline Tensor uniform64(Shape s, double lo, double hi, uint64_t seed) {
  Generator g(seed);
  return rand(std::move(s), {.dtype = DType::Float64}, &g) * (hi - lo) + lo;
}

inline Tensor leaf(const Tensor& t) {
  return t.detach().requires_grad_();
}

inline std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

// Expects f() to throw ember::Error whose message contains every one of `needles`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "expected an ember::Error mentioning '" << *needles.begin() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "message: " << msg;
  }
}

// |y - r| <= rtol |r| + atol, NaN matching NaN and infinities matching exactly.
inline ::testing::AssertionResult close_to(double y, double r, double rtol, double atol = 0.0) {
  if (std::isnan(r)) {
    if (std::isnan(y)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << y << " is not NaN";
  }
  if (std::isinf(r)) {
    if (y == r) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << y << " != " << r;
  }
  if (std::fabs(y - r) <= rtol * std::fabs(r) + atol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << y << " vs reference " << r << " (relative error "
                                       << std::fabs(y - r) / std::fabs(r) << ")";
}

// A float32 result against a double reference: an infinite float rounding of the reference must
// be matched exactly.
inline ::testing::AssertionResult close_to_f32(float y, double r, double rtol, double atol = 1e-44) {
  if (!std::isnan(r) && std::isinf(static_cast<float>(r))) {
    if (y == static_cast<float>(r)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << y << " != " << static_cast<float>(r);
  }
  return close_to(y, r, rtol, atol);
}

}  // namespace ember::test
