// The harness's comparison on crafted tensors (ember_ops_tests --group=harness): element by element
// with a relative and an absolute part, so that an error in a small element fails even where the
// tensor holds large ones; the rule it replaced (the largest error relative to max(1, the largest
// |want|)) is kept here only to show that it passed the same planted error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "run_row.h"

namespace ember::ops_test {
namespace {

// The old rule, verbatim in effect: empty when max |got - want| <= tol * max(1, max |want|).
std::string old_max_relative_mismatch(const Tensor& got, const Tensor& want, double tol) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 1.0, worst = 0.0;
  for (double v : w) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - w[i]));
  return worst / scale > tol ? "over" : "";
}

// want: 1000 float64 values from 0.01 to 100 in magnitude, of both signs; got: the same rounded to
// float32, as a correct float32 kernel would return them.
Tensor spread() {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back((i % 2 ? -1.0 : 1.0) * std::pow(10.0, -2.0 + 4.0 * i / 999.0));
  return from_vector<double>(v, {1000});
}

class Body : public ::testing::Test {
 public:
  explicit Body(std::function<void()> f) : f_(std::move(f)) {}
  void TestBody() override { f_(); }

 private:
  std::function<void()> f_;
};

void add(const char* name, std::function<void()> f) {
  ::testing::RegisterTest("Comparison", name, nullptr, nullptr, __FILE__, __LINE__,
                          [f]() -> ::testing::Test* { return new Body(f); });
}

}  // namespace

void register_comparison_tests() {
  const Tolerance f32 = default_tolerance(DType::Float32);

  add("correct_float32_result_passes", [f32] {
    const Tensor want = spread();
    EXPECT_EQ(mismatch(want.to(DType::Float32), want, f32), "");
  });

  // The planted fault: the smallest-magnitude element (0.01) off by a relative 1e-3 (1e-5). The old
  // rule's bound was 2e-4 * 100 = 2e-2 for this tensor: it passed; the new one's is 1e-6 + 1e-7.
  add("small_element_off_by_relative_1e_3_fails", [f32] {
    const Tensor want = spread();
    std::vector<double> g = want.to(DType::Float32).to_vector<double>();
    g[0] *= 1.0 + 1e-3;
    const Tensor got = from_vector<double>(g, {1000}).to(DType::Float32);
    EXPECT_EQ(old_max_relative_mismatch(got, want, 2e-4), "") << "the old rule was expected to pass it";
    const std::string m = mismatch(got, want, f32);
    EXPECT_NE(m.find("element 0:"), std::string::npos) << m;
  });

  // Each element against its own magnitude: the largest one may be off by its rtol share, no more.
  add("large_element_within_rtol_passes_beyond_fails", [f32] {
    const Tensor want = spread();
    std::vector<double> g = want.to_vector<double>();
    g[999] *= 1.0 + 5e-6;
    EXPECT_EQ(mismatch(from_vector<double>(g, {1000}).to(DType::Float32), want, f32), "");
    g[999] *= 1.0 + 5e-5;
    EXPECT_NE(mismatch(from_vector<double>(g, {1000}).to(DType::Float32), want, f32), "");
  });

  // An element whose exact value is zero (a cancellation) is held to the absolute part.
  add("near_zero_element_held_to_atol", [f32] {
    const Tensor want = from_vector<double>({0.0, 1.0}, {2});
    EXPECT_EQ(mismatch(from_vector<float>({5e-7f, 1.0f}, {2}), want, f32), "");
    EXPECT_NE(mismatch(from_vector<float>({5e-6f, 1.0f}, {2}), want, f32), "");
  });

  // Integers exactly, beyond 2^53 too (a double comparison would call these equal).
  add("int64_beyond_2_pow_53_exact", [] {
    const int64_t big = int64_t{1} << 53;
    const Tensor want = from_vector<int64_t>({big, 3}, {2});
    EXPECT_EQ(mismatch(from_vector<int64_t>({big, 3}, {2}), want, default_tolerance(DType::Int64)), "");
    EXPECT_NE(mismatch(from_vector<int64_t>({big + 1, 3}, {2}), want, default_tolerance(DType::Int64)), "");
  });

  // NaN where NaN, the same infinities, the same shape.
  add("nan_inf_and_shape", [f32] {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const Tensor want = from_vector<double>({nan, INFINITY, 1.0}, {3});
    EXPECT_EQ(mismatch(from_vector<float>({NAN, INFINITY, 1.0f}, {3}), want, f32), "");
    EXPECT_NE(mismatch(from_vector<float>({1.0f, INFINITY, 1.0f}, {3}), want, f32), "");
    EXPECT_NE(mismatch(from_vector<float>({NAN, -INFINITY, 1.0f}, {3}), want, f32), "");
    EXPECT_NE(mismatch(from_vector<float>({NAN, INFINITY, NAN}, {3}), want, f32), "");
    EXPECT_NE(mismatch(from_vector<float>({NAN, INFINITY}, {2}), want, f32), "");
  });

  // A row's own bound replaces the dtype's; tol 0 with the atol left to the dtype is exact.
  add("row_overrides", [] {
    OpRow exact{"exact", nullptr, nullptr, 0.0};
    const Tolerance t = tolerance_for(exact, DType::Float32);
    EXPECT_EQ(t.rtol, 0.0);
    EXPECT_EQ(t.atol, 0.0);
    OpRow loose{"loose", nullptr, nullptr, 1e-3};
    loose.atol = 1e-4;
    EXPECT_EQ(tolerance_for(loose, DType::Float32).rtol, 1e-3);
    EXPECT_EQ(tolerance_for(loose, DType::Float32).atol, 1e-4);
    OpRow by_dtype{"by_dtype", nullptr, nullptr};
    EXPECT_EQ(tolerance_for(by_dtype, DType::Float64).rtol, default_tolerance(DType::Float64).rtol);
  });
}

}  // namespace ember::ops_test
