// conv2d_max_pool2d on the CPU with its batch shared by two threads, several chunks each: the
// values and the gradients of input, weight and bias must be those of conv2d then max_pool2d.
// The op table (tests/ops/op_rows_conv_pool.cpp) checks it on every backend and level; this one is
// in the core suite so that the ThreadSanitizer pass (scripts/test.sh) runs the op's threads:
// per-thread buffers, views and in-place sums made inside the parallel region.
#include "nn_test_util.h"
#include "test_helpers.h"

namespace nn_test {
namespace {

TEST(Conv2dMaxPool2d, TwoThreadsAgreeWithTheTwoOps) {
  test_util::ScopedThreads two(2);
  for (DType dt : {DType::Float64, DType::Float32}) {
    // 8 x 92 x 92 float64 outputs are 529 KiB an image (265 KiB in float32): one or two images a
    // chunk, so each thread's three or four images make several chunks.
    Tensor x = randn_t({7, 2, 94, 94}, 1, dt, true), w = randn_t({8, 2, 3, 3}, 2, dt, true);
    Tensor b = randn_t({8}, 3, dt, true);
    Tensor x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
    Tensor b2 = b.detach().clone().requires_grad_();
    Pool2dParams pool;
    Tensor y = conv2d_max_pool2d(x, w, b, {}, pool);
    Tensor y2 = max_pool2d(conv2d(x2, w2, b2), pool);
    const double tol = dt == DType::Float64 ? 1e-12 : 1e-4;
    ASSERT_EQ(y.shape(), y2.shape());
    EXPECT_TRUE(all_close(y, vec(y2), tol, tol));
    Tensor g = randn_t(y.shape(), 4, dt);
    (y * g).sum().backward();
    (y2 * g).sum().backward();
    EXPECT_TRUE(all_close(x.grad(), vec(x2.grad()), tol, tol));
    EXPECT_TRUE(all_close(w.grad(), vec(w2.grad()), 100 * tol, tol));
    EXPECT_TRUE(all_close(b.grad(), vec(b2.grad()), 100 * tol, tol));
  }
}

// The chunked path keeps two weight-sized sums per thread: above 256 KiB of weights (a VGG layer
// would need a GiB on 64 cores) the op runs conv2d then max_pool2d, whose last node is the pooling.
TEST(Conv2dMaxPool2d, LargeWeightsRunTheTwoOps) {
  Tensor x = randn_t({2, 128, 4, 4}, 1, DType::Float32, true);
  Tensor small = randn_t({8, 128, 3, 3}, 2, DType::Float32, true);   // 36 KiB
  Tensor large = randn_t({64, 128, 3, 3}, 3, DType::Float32, true);  // 288 KiB
  EXPECT_EQ(conv2d_max_pool2d(x, small, Tensor(), {}, {}).grad_fn()->name(), "Conv2dMaxPool2dBackward");
  EXPECT_EQ(conv2d_max_pool2d(x, large, Tensor(), {}, {}).grad_fn()->name(), "MaxPool2dBackward");
}

// Bad arguments are the convolution's and the pooling's own errors, named for this op.
TEST(Conv2dMaxPool2d, BadArgumentsNameTheOp) {
  const Tensor x = randn_t({2, 3, 8, 8}, 1, DType::Float32), w = randn_t({4, 3, 3, 3}, 2, DType::Float32);
  const Tensor w2 = randn_t({4, 2, 3, 3}, 3, DType::Float32), b5 = randn_t({5}, 4, DType::Float32);
  expect_error([&] { conv2d_max_pool2d(x, w2, Tensor(), {}, {}); },
               {"conv2d_max_pool2d", "3 channels", "weight expects 2"});
  Pool2dParams wide;
  wide.kernel = {7, 7};  // the convolution's output is 6x6
  expect_error([&] { conv2d_max_pool2d(x, w, Tensor(), {}, wide); },
               {"conv2d_max_pool2d", "too small", "[2, 4, 6, 6]"});
  expect_error([&] { conv2d_max_pool2d(x, w, b5, {}, {}); }, {"conv2d_max_pool2d", "bias must have shape [4]"});
}

}  // namespace
}  // namespace nn_test
