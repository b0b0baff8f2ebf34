// The shapes the kernel report profiles: a representative use of each kernel family, sized so that
// full tiles dominate (multiples of the GEMM's 128 x 128 tile) and small enough for the emulator.
// Inputs are drawn on the CPU and copied to the device, so that a case launches only the kernels
// of its call: on a GPU (ember_kernel_report --on-gpu, for Nsight Compute) the same sequence.
#include "core/ops.h"
#include "core/ops/rnn.h"
#include "emu_profile/kernel_report.h"

namespace kernel_report {
namespace {

using ember::Tensor;

Tensor on(ember::Device device, ember::Shape shape, ember::DType dtype = ember::DType::Float32) {
  return ember::randn(std::move(shape)).to(dtype).to(device);
}

Case mm_case(const std::string& name, int64_t m, int64_t n, int64_t k, ember::DType dtype, bool transpose_b) {
  Case c;
  c.name = name;
  c.make = [=](ember::Device d) {
    Tensor a = on(d, {m, k}, dtype);
    Tensor b = transpose_b ? on(d, {n, k}, dtype).t() : on(d, {k, n}, dtype);
    return std::function<void()>([a, b] { ember::mm(a, b); });
  };
  c.flops = 2.0 * static_cast<double>(m * n * k);
  // float: the vectorised warp-tiled kernel (the shapes are 16-byte aligned); double: gemm_kernel;
  // bfloat16: the tensor-core kernel.
  c.flop_kernel = dtype == ember::DType::Float32    ? "sgemm_warptile"
                  : dtype == ember::DType::BFloat16 ? "gemm_bf16_mma"
                                                    : "gemm_kernel";
  c.fp64 = dtype == ember::DType::Float64;
  return c;
}

Case conv_case(ember::DType dtype) {
  const bool bf16 = dtype == ember::DType::BFloat16;
  Case c;
  c.name = bf16 ? "conv2d bf16 8x32x32x32, 64x3x3" : "conv2d 8x32x32x32, 64x3x3";
  c.make = [dtype](ember::Device d) {
    Tensor x = on(d, {8, 32, 32, 32}, dtype), w = on(d, {64, 32, 3, 3}, dtype);
    ember::Conv2dParams p;
    p.padding = {1, 1};
    return std::function<void()>([x, w, p] { ember::conv2d(x, w, Tensor(), p); });
  };
  c.flops = 2.0 * 8 * 64 * 32 * 32 * 32 * 9;
  c.flop_kernel = bf16 ? "implicit_gemm_bf16" : "implicit_gemm";
  return c;
}

// A memory-bound op on one float tensor.
Case unary_case(const std::string& name, ember::Shape shape, std::function<void(const Tensor&)> op) {
  Case c;
  c.name = name;
  c.make = [shape, op](ember::Device d) {
    Tensor x = on(d, shape);
    return std::function<void()>([x, op] { op(x); });
  };
  return c;
}

// A recurrent layer's forward (T steps of batch B, LSTM with input and hidden size H): per direction
// the input projection, then per step a B x 4H x H GEMM and a cell launch; both directions of a
// bidirectional layer step together (one batched GEMM, one cell launch; docs/cuda/conv-rnn-norm.md).
// Its per-step GEMMs are what the "H100 fill" column is about.
Case lstm_case(bool bidirectional) {
  constexpr int64_t T = 4, B = 32, H = 128;
  Case c;
  c.name = std::string(bidirectional ? "bilstm" : "lstm") + " layer T4 B32 H128";
  c.make = [bidirectional](ember::Device d) {
    // Both W_hh in one block, the reverse one second: read in place on any device, so that a GPU
    // launches exactly the emulator's kernels (no copy that another allocation order would add).
    const Tensor w_hh = on(d, {2, 4 * H, H});
    auto weights = [&](int64_t dir) {
      ember::RnnDirectionWeights w;
      w.w_ih = on(d, {4 * H, H}), w.w_hh = w_hh[dir], w.b_ih = on(d, {4 * H});
      return w;
    };
    const Tensor x = on(d, {T, B, H});
    const ember::RnnDirectionWeights f = weights(0), r = bidirectional ? weights(1) : f;
    return std::function<void()>([x, f, r, bidirectional] {
      if (bidirectional)
        ember::rnn_layer_bidirectional(ember::RnnMode::Lstm, x, f, r);
      else
        ember::rnn_layer(ember::RnnMode::Lstm, x, f.w_ih, f.w_hh, f.b_ih, f.b_hh, Tensor(), Tensor());
    });
  };
  c.flops = (bidirectional ? 2.0 : 1.0) * 2.0 * T * B * 4 * H * (H + H);
  c.flop_kernel = "sgemm_warptile";
  return c;
}

}  // namespace

std::vector<Case> representative_cases() {
  using ember::Tensor;
  std::vector<Case> v;
  v.push_back(mm_case("mm f32 256x256x256", 256, 256, 256, ember::DType::Float32, false));
  v.push_back(mm_case("mm f32 256x256x256 B^T", 256, 256, 256, ember::DType::Float32, true));
  // Split-K: one tile, K 3136 in 49 slices of 64 and their sum (MnistCnn's fc1).
  v.push_back(mm_case("mm f32 64x128x3136 split-K", 64, 128, 3136, ember::DType::Float32, false));
  v.push_back(mm_case("mm f64 128x128x128", 128, 128, 128, ember::DType::Float64, false));
  v.push_back(mm_case("mm bf16 256x256x256", 256, 256, 256, ember::DType::BFloat16, false));
  v.push_back(conv_case(ember::DType::Float32));
  v.push_back(conv_case(ember::DType::BFloat16));
  v.push_back(lstm_case(false));
  v.push_back(lstm_case(true));
  v.push_back(unary_case("relu 256K", {256, 1024}, [](const Tensor& x) { ember::relu(x); }));
  v.push_back(unary_case("add 256K", {256, 1024}, [](const Tensor& x) { ember::add(x, x); }));
  v.push_back(unary_case("transpose copy 512x512", {512, 512}, [](const Tensor& x) { x.t().contiguous(); }));
  v.push_back(unary_case("sum rows 256x1024", {256, 1024}, [](const Tensor& x) { ember::sum(x, {1}); }));
  v.push_back(unary_case("sum columns 256x1024", {256, 1024}, [](const Tensor& x) { ember::sum(x, {0}); }));
  v.push_back(unary_case("softmax rows 256x1024", {256, 1024}, [](const Tensor& x) { ember::softmax(x, 1); }));
  v.push_back(unary_case("layer_norm 256x1024", {256, 1024}, [](const Tensor& x) { ember::layer_norm(x, {1024}); }));
  v.push_back(unary_case("max_pool2d 8x32x32x32", {8, 32, 32, 32}, [](const Tensor& x) { ember::max_pool2d(x, 2); }));
  return v;
}

}  // namespace kernel_report
