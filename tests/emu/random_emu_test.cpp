// The CUDA random fills (core/cuda/random.cu) run by the kernel emulator against the CPU kernel,
// for what no op asks of them: a bernoulli mask of a different dtype (uint8) than its float64
// probability tensor (bernoulli(p) gives p's dtype), bit for bit, in all three thread orders. The
// op table (tests/ops/op_rows_dtypes.cpp) checks the streams of every fill and dtype through the
// ops, and dropout's mask.
#include <gtest/gtest.h>

#include "core/random.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {
class Random : public emu_test::EmulatedKernel {};
}  // namespace

TEST_P(Random, BernoulliMaskOfAFloat64ProbabilityTensorMatchesTheCpu) {
  const int64_t n = 777;
  Tensor prob = rand({n}, {.dtype = DType::Float64});
  RandomParams p;
  p.kind = RandomKind::Bernoulli;
  p.seed = 42;
  p.offset = 3;
  Tensor mask = empty({n}, {.dtype = DType::UInt8});
  random_stub(Device::cpu())(mask, p, prob);
  Tensor dmask = device_empty({n}, DType::UInt8);
  emu::kernel(random_stub)(dmask, p, device_copy(prob));
  expect_close(dmask, mask, 0, 0, "bernoulli mask");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Random, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
