// Rows: conv2d_max_pool2d (core/ops/conv_pool.cpp) against max_pool2d(conv2d(...)) run as two
// ops, values and the gradients of input, weight and bias, through each convolution path its
// chunks reach (MNIST's one-channel first layer on im2col, the channels-last path of small
// images, strides and dilation without bias), pooling windows that tile, overlap, pad and overhang
// (ceil_mode), a batch whose images are cut into several chunks per thread (each image's
// convolution output is above the op's half-MiB chunk), a weight too large for the chunked path,
// and an empty batch. The small rows are
// also checked by finite differences in float64.
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

struct ConvPoolCfg {
  std::string name;
  int64_t N, C, H, W, OC, K;
  Conv2dParams conv;
  Pool2dParams pool;
  bool bias = true;
  bool gradcheck = true;
};

std::vector<ConvPoolCfg> cfgs() {
  std::vector<ConvPoolCfg> v;
  v.push_back({"mnist_first_layer", 5, 1, 10, 10, 3, 3, {}, {}});
  Conv2dParams padded;
  padded.padding = {1, 1};
  Pool2dParams overlapping{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  v.push_back({"channels_last_overlapping_padded_pool", 4, 8, 7, 7, 4, 3, padded, overlapping});
  Conv2dParams strided;
  strided.stride = {2, 1};
  strided.dilation = {1, 2};
  Pool2dParams ceil{.kernel = {2, 3}, .stride = {2, 2}, .ceil_mode = true};
  v.push_back({"strided_dilated_ceil_pool_no_bias", 3, 2, 9, 11, 3, 3, strided, ceil, false});
  // MNIST's second layer scaled down: the convolution on the Winograd path, two chunks.
  v.push_back({"winograd", 24, 8, 13, 13, 8, 3, {}, {}, true, false});
  // 4 x 184 x 184 float32 outputs are 529 KiB an image: one image a chunk, three chunks in all.
  v.push_back({"several_chunks", 3, 1, 186, 186, 4, 3, {}, {}, true, false});
  // 64 x 128 x 3 x 3 float32 weights are 288 KiB: over the op's limit, it runs the two ops.
  v.push_back({"large_weight", 2, 128, 4, 4, 64, 3, {}, {}, true, false});
  return v;
}

}  // namespace

void add_conv_pool_rows(std::vector<OpRow>& t) {
  for (const ConvPoolCfg& c : cfgs()) {
    OpRow r{
        "conv2d_max_pool2d_vs_composed_" + c.name,
        [c](Generator& g) {
          Inputs in{rn(g, {c.N, c.C, c.H, c.W}), rn(g, {c.OC, c.C, c.K, c.K})};
          if (c.bias) in.push_back(rn(g, {c.OC}));
          return in;
        },
        [c](const Inputs& x) {
          const Tensor b = c.bias ? x[2] : Tensor();
          return checked_composed(
              conv2d_max_pool2d(x[0], x[1], b, c.conv, c.pool), x,
              [c](const Inputs& h) { return max_pool2d(conv2d(h[0], h[1], c.bias ? h[2] : Tensor(), c.conv), c.pool); },
              Tolerance{2e-4, accumulation_atol(DType::Float32, c.C * c.K * c.K)});  // sums of C K K products
        }};
    r.atol = accumulation_atol(DType::Float32, c.C * c.K * c.K);
    r.gradcheck = c.gradcheck;
    t.push_back(std::move(r));
  }
  // An empty batch: no outputs, and zero weight and bias gradients (the sums add one to both).
  t.push_back({"conv2d_max_pool2d_empty_batch",
               [](Generator& g) {
                 return Inputs{rn(g, {0, 2, 6, 6}), rn(g, {3, 2, 3, 3}), rn(g, {3})};
               },
               [](const Inputs& x) {
                 return add(sum(conv2d_max_pool2d(x[0], x[1], x[2], {}, {})), add(sum(x[1]), sum(x[2])));
               }});
}

}  // namespace ember::ops_test
