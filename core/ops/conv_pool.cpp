// conv2d followed by max_pool2d as one op, for the convolution-pooling pairs of CNNs.
//
// On the CPU each thread takes a contiguous share of the batch and runs it a few images at a
// time: a chunk's convolution output goes to a buffer of the thread's own, small enough to stay
// in the core's L2 cache, and is pooled from there, so only the pooled output and its indices go
// to memory. The backward rebuilds each chunk's convolution gradient from the indices in the same
// buffer and runs the convolution's two backward kernels on it. Unfused, MnistCnn's first
// convolution wrote 5.5 MB per batch of 64 that the pooling read back, and the pooling's gradient
// wrote 5.5 MB that the convolution's weight gradient read back; at two threads the two cores
// shared that traffic. The kernels are conv2d's and max_pool2d's own, run on one chunk at a time
// (inside the region they run single-threaded), so the values are theirs.
//
// Other devices run the two ops one after the other: a GPU's kernels take the whole batch at once
// and its caches are not a core's. So do convolutions with large weights (kMaxWeightBytes).
#include <algorithm>
#include <vector>

#include "core/autograd/node.h"
#include "core/nn_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/nn.h"
#include "core/ops/nn_checks.h"
#include "core/parallel.h"

namespace ember {

namespace {

// A chunk's convolution output stays within half a MiB: half the L2 of the cores Ember has been
// measured on (1 MiB on AMD Zen 4 and 5; 2 MiB on Intel Sapphire Rapids), leaving room for the
// convolution's own im2col buffers. Older cores with 256 KiB of L2 keep it in L3, still short of
// a round trip through memory.
constexpr int64_t kChunkBytes = int64_t{1} << 19;

// Above this many weight bytes the two ops run instead. The backward keeps two weight-sized sums
// per thread, which for a VGG layer (512 x 512 x 3 x 3, 9 MiB) on a 64-core machine would be over
// a GiB; and such a layer is GEMM-bound, with enough work per image for the convolution's own
// threads, so keeping its output in cache gains little.
constexpr int64_t kMaxWeightBytes = int64_t{1} << 18;

// How the batch is cut: `slots` threads, each with a contiguous share cut into chunks of at most
// `per` images.
struct ChunkPlan {
  int slots = 1;
  int64_t per = 1;
};

ChunkPlan plan_chunks(const ConvGeometry& g, int64_t elem_size) {
  ChunkPlan c;
  c.slots = static_cast<int>(std::clamp<int64_t>(threads_here(), 1, std::max<int64_t>(1, g.N)));
  const int64_t share = (g.N + c.slots - 1) / c.slots;
  const int64_t image = std::max<int64_t>(1, g.OC * g.OH * g.OW * elem_size);
  c.per = std::clamp<int64_t>(kChunkBytes / image, 1, std::max<int64_t>(1, share));
  return c;
}

// The geometries of a chunk of nb images.
ConvGeometry conv_chunk(ConvGeometry g, int64_t nb) {
  g.N = nb;
  return g;
}
Pool2dGeometry pool_chunk(Pool2dGeometry g, int64_t planes) {
  g.P = planes;
  return g;
}

}  // namespace

Tensor conv2d_max_pool2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Conv2dParams conv,
                         Pool2dParams pool) {
  // Under autocast the two halves part: the convolution in 16 bits, the pooling in float32.
  if (auto c = autocast_args(AutocastOp::conv2d_max_pool2d, input, weight, bias))
    return max_pool2d(conv2d((*c)[0], (*c)[1], (*c)[2], conv), pool);
  const char* op = "conv2d_max_pool2d";
  const ConvGeometry g = nn_detail::conv2d_geometry(input, weight, bias, conv, op);
  const Pool2dGeometry pg = nn_detail::pool2d_geometry({g.N, g.OC, g.OH, g.OW}, pool, op);
  const int64_t weight_bytes = weight.numel() * static_cast<int64_t>(itemsize(weight.dtype()));
  const bool is_16bit = input.dtype() == DType::Float16 || input.dtype() == DType::BFloat16;
  if (!input.device().is_cpu() || g.N == 0 || weight_bytes > kMaxWeightBytes || is_16bit)
    return max_pool2d(conv2d(input, weight, bias, conv), pool);

  Tensor x = nn_detail::raw(input), w = nn_detail::raw(weight), b = nn_detail::raw(bias);
  Tensor out = empty({g.N, g.OC, pg.OH, pg.OW}, input.options());
  Tensor indices = empty(out.shape(), {DType::Int64, input.device()});
  const ChunkPlan cp = plan_chunks(g, static_cast<int64_t>(itemsize(x.dtype())));
  // Every slot's buffer, allocated here: nothing inside the parallel region may throw.
  Tensor buf = empty({cp.slots * cp.per, g.OC, g.OH, g.OW}, x.options());
  const auto conv_forward = conv2d_forward_stub(x.device());
  const auto pool_forward = max_pool2d_forward_stub(x.device());
  parallel_slots(g.N, cp.slots, [&](int slot, int64_t begin, int64_t end) {
    for (int64_t n0 = begin; n0 < end; n0 += cp.per) {
      const int64_t nb = std::min(cp.per, end - n0);
      const Tensor y = buf.narrow(0, slot * cp.per, nb);
      conv_forward(y, x.narrow(0, n0, nb), w, b, conv_chunk(g, nb));
      pool_forward(out.narrow(0, n0, nb), indices.narrow(0, n0, nb), y, pool_chunk(pg, nb * g.OC));
    }
  });

  if (autograd::any_requires_grad({input, weight, bias})) {
    autograd::SavedTensor sx(x), sw(w), si(indices);
    const bool has_bias = bias.defined();
    autograd::record("Conv2dMaxPool2dBackward", {input, weight, bias}, {out},
                     [sx, sw, si, g, pg, has_bias](const std::vector<Tensor>& gr, const std::vector<bool>& n) {
                       std::vector<Tensor> r(3);
                       const Tensor go = nn_detail::raw(gr[0]), xv = sx.get(), wv = sw.get(), iv = si.get();
                       const bool want_w = n[1], want_b = has_bias && n[2];
                       const ChunkPlan cp = plan_chunks(g, static_cast<int64_t>(itemsize(xv.dtype())));
                       if (n[0]) r[0] = empty(xv.shape(), xv.options());
                       // Per slot: the chunk's convolution gradient, and the weight and bias gradients summed
                       // over the slot's chunks (a chunk's own land in the *_chunk tensors first: the kernel
                       // overwrites its outputs).
                       Tensor dy = empty({cp.slots * cp.per, g.OC, g.OH, g.OW}, xv.options());
                       Shape wshape = wv.shape();
                       wshape.insert(wshape.begin(), cp.slots);
                       Tensor gw_sum = want_w ? zeros(wshape, wv.options()) : Tensor();
                       Tensor gw_chunk = want_w ? empty(wshape, wv.options()) : Tensor();
                       Tensor gb_sum = want_b ? zeros({cp.slots, g.OC}, wv.options()) : Tensor();
                       Tensor gb_chunk = want_b ? empty({cp.slots, g.OC}, wv.options()) : Tensor();
                       const auto pool_backward = max_pool2d_backward_stub(go.device());
                       const auto input_backward = conv2d_backward_input_stub(go.device());
                       const auto weight_backward = conv2d_backward_weight_stub(go.device());
                       parallel_slots(g.N, cp.slots, [&](int slot, int64_t begin, int64_t end) {
                         const Tensor gwc = want_w ? gw_chunk.select(0, slot) : Tensor();
                         const Tensor gbc = want_b ? gb_chunk.select(0, slot) : Tensor();
                         for (int64_t n0 = begin; n0 < end; n0 += cp.per) {
                           const int64_t nb = std::min(cp.per, end - n0);
                           const ConvGeometry gc = conv_chunk(g, nb);
                           const Tensor d = dy.narrow(0, slot * cp.per, nb);
                           pool_backward(d, go.narrow(0, n0, nb), iv.narrow(0, n0, nb), pool_chunk(pg, nb * g.OC));
                           if (n[0]) input_backward(r[0].narrow(0, n0, nb), d, wv, Tensor(), gc);
                           if (!want_w && !want_b) continue;
                           weight_backward(gwc, gbc, d, xv.narrow(0, n0, nb), gc);
                           if (want_w) gw_sum.select(0, slot).add_(gwc);
                           if (want_b) gb_sum.select(0, slot).add_(gbc);
                         }
                       });
                       if (want_w) r[1] = gw_sum.sum({0});
                       if (want_b) r[2] = gb_sum.sum({0});
                       return r;
                     });
  }
  return out;
}

}  // namespace ember
