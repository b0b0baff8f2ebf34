// Helpers shared by the layer tests: error capture, float64 random inputs and a module gradcheck
// over the input and every parameter.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/autograd/gradcheck.h"
#include "layers/nn.h"
#include "test_helpers.h"

namespace layers_test {

using test_util::error_of;
using test_util::has;
using test_util::vec;

inline void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

inline ember::Tensor rand64(ember::Shape s, uint64_t seed, bool requires_grad = true) {
  ember::Generator g(seed);
  return ember::randn(std::move(s), {.dtype = ember::DType::Float64, .requires_grad = requires_grad}, &g);
}

// Converts `m` to float64 and checks d(m(x))/d(x, every parameter) against finite differences.
inline void gradcheck_module(ember::nn::Module& m, const ember::Tensor& x) {
  m.to(ember::DType::Float64);
  std::vector<ember::Tensor> inputs{x};
  for (const ember::Tensor& p : m.parameters()) inputs.push_back(p);
  ember::GradcheckResult r = ember::gradcheck([&](const std::vector<ember::Tensor>& in) { return m(in[0]); }, inputs);
  EXPECT_TRUE(r.ok) << m.type_name() << "(" << m.extra_repr() << "): " << r.message;
}

inline std::vector<std::string> names(const ember::nn::NamedTensors& nt) {
  std::vector<std::string> r;
  for (const auto& [n, t] : nt) r.push_back(n);
  return r;
}

}  // namespace layers_test
