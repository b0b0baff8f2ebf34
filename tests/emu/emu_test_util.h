// Helpers for the emulated kernel tests: "device" tensors in exact-size host allocations (so that
// AddressSanitizer sees a kernel's out-of-bounds access), the three thread orders every kernel
// test runs in, and a tolerance comparison against the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/emu/emu.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace emu_test {

using ember::emu::ThreadOrder;

// A contiguous copy of t in a malloc'ed block of exactly its bytes.
inline ember::Tensor device_copy(const ember::Tensor& t) {
  ember::Tensor c = t.contiguous();
  const size_t bytes = static_cast<size_t>(c.numel()) * c.itemsize();
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (bytes) std::memcpy(p, c.raw_data(), bytes);
  return ember::from_blob(p, c.shape(), c.dtype(), [](void* q) { std::free(q); });
}

// An uninitialised "device" tensor, filled with a pattern a kernel must overwrite.
inline ember::Tensor device_empty(ember::Shape shape, ember::DType dtype) {
  const size_t bytes = static_cast<size_t>(ember::numel_of(shape)) * ember::itemsize(dtype);
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  std::memset(p, 0xA5, bytes);
  return ember::from_blob(p, shape, dtype, [](void* q) { std::free(q); });
}

struct OrderCase {
  ThreadOrder order;
  uint64_t seed;
};
inline void PrintTo(const OrderCase& c, std::ostream* os) {
  *os << ember::emu::thread_order_name(c.order) << " (seed " << c.seed << ")";
}
inline const std::vector<OrderCase>& all_orders() {
  static const std::vector<OrderCase> v = {
      {ThreadOrder::Forward, 0}, {ThreadOrder::Reverse, 0}, {ThreadOrder::Random, 7}};
  return v;
}
inline std::string order_name(const testing::TestParamInfo<OrderCase>& info) {
  return ember::emu::thread_order_name(info.param.order);
}

// Fixture for tests run once per thread order.
class EmulatedKernel : public testing::TestWithParam<OrderCase> {
 protected:
  void SetUp() override { ember::emu::set_thread_order(GetParam().order, GetParam().seed); }
  void TearDown() override { ember::emu::set_thread_order(ThreadOrder::Forward, 0); }
};

// Elementwise |a - b| <= atol + rtol * |b| (NaN matches NaN, infinities match themselves).
inline void expect_close(const ember::Tensor& got, const ember::Tensor& want, double rtol, double atol,
                         const std::string& what = "") {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok =
        (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] || std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok && bad++ < 5) ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i];
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements differ";
}

}  // namespace emu_test
