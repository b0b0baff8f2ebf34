// Helpers shared by the NN op tests (conv, pool, norm, dropout, cross-entropy): seeded random
// tensors, element-wise comparison with the worst mismatch reported, and error capture.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/autograd/node.h"
#include "core/ops.h"

namespace nn_test {

using namespace ember;

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Expects `f` to throw ember::Error whose message contains every piece.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& pieces) {
  const std::string msg = error_of(f);
  EXPECT_FALSE(msg.empty()) << "no ember::Error thrown (expected one mentioning '" << pieces.front() << "')";
  for (const auto& p : pieces) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

inline Tensor randn_t(Shape s, uint64_t seed, DType dt = DType::Float64, bool rg = false) {
  Generator g(seed);
  Tensor t = randn(std::move(s), {.dtype = dt}, &g);
  if (rg) t.requires_grad_();
  return t;
}

inline std::vector<double> vec(const Tensor& t) {
  return t.contiguous().to_vector<double>();
}

// |a - b| <= atol + rtol * |b| everywhere; reports the worst element.
inline ::testing::AssertionResult all_close(const std::vector<double>& a, const std::vector<double>& b,
                                            double atol = 1e-10, double rtol = 1e-10) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  double worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = a[i] == b[i] ? 0.0 : std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
    if (!(err <= worst) || std::isnan(a[i]) != std::isnan(b[i])) {
      worst = std::isnan(err) ? INFINITY : err;
      wi = i;
    }
  }
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << wi << ": " << a[wi] << " vs expected " << b[wi];
}

inline ::testing::AssertionResult all_close(const Tensor& a, const std::vector<double>& b, double atol = 1e-10,
                                            double rtol = 1e-10) {
  return all_close(vec(a), b, atol, rtol);
}

}  // namespace nn_test
