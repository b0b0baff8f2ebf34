// Pooling ops: max (values, or values and indices), average and adaptive average over the last
// two dims of [N, C, H, W] or [C, H, W] inputs, with PyTorch's output-size rules; one autograd
// node each.
#include "core/autograd/node.h"
#include "core/nn_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/nn.h"
#include "core/ops/nn_checks.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
using nn_detail::raw;

namespace {

void check_pool_input(const Tensor& input, const char* op) {
  nn_detail::check_float_input(input, op, "input");
  EMBER_CHECK(input.dim() == 3 || input.dim() == 4, op,
              ": expected a 3-D [C, H, W] or 4-D [N, C, H, W] input, got shape ", shape_str(input.shape()));
  EMBER_CHECK(input.size(-1) > 0 && input.size(-2) > 0, op, ": the input's spatial size must be non-zero, got shape ",
              shape_str(input.shape()));
}

// PyTorch's pooling output size: the last window must start inside the input or the left padding.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  const int64_t num = in + 2 * p - k + (ceil_mode ? s - 1 : 0);
  // floor division (num may be negative when the kernel does not fit)
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

}  // namespace

Pool2dGeometry nn_detail::pool2d_geometry(const Shape& shape, const Pool2dParams& p, const char* op) {
  Pool2dGeometry g;
  g.kh = p.kernel[0], g.kw = p.kernel[1];
  g.sh = p.stride[0] == 0 ? g.kh : p.stride[0];
  g.sw = p.stride[1] == 0 ? g.kw : p.stride[1];
  g.ph = p.padding[0], g.pw = p.padding[1];
  g.count_include_pad = p.count_include_pad;
  EMBER_CHECK(g.kh > 0 && g.kw > 0, op, ": kernel size must be positive, got [", g.kh, ", ", g.kw, "]");
  EMBER_CHECK(g.sh > 0 && g.sw > 0, op, ": stride must be positive (or 0 for the kernel size), got [", p.stride[0],
              ", ", p.stride[1], "]");
  EMBER_CHECK(g.ph >= 0 && g.pw >= 0, op, ": padding must be non-negative, got [", g.ph, ", ", g.pw, "]");
  EMBER_CHECK(g.ph <= g.kh / 2 && g.pw <= g.kw / 2, op, ": padding [", g.ph, ", ", g.pw,
              "] must be at most half of the kernel size [", g.kh, ", ", g.kw, "]");
  const size_t d = shape.size();
  g.H = shape[d - 2], g.W = shape[d - 1];
  g.P = numel_of(shape) / (g.H * g.W);
  g.OH = pool_out_size(g.H, g.kh, g.sh, g.ph, p.ceil_mode);
  g.OW = pool_out_size(g.W, g.kw, g.sw, g.pw, p.ceil_mode);
  EMBER_CHECK(g.OH > 0 && g.OW > 0, op, ": output size ", g.OH, "x", g.OW, " is too small (input shape ",
              shape_str(shape), ", kernel [", g.kh, ", ", g.kw, "], padding [", g.ph, ", ", g.pw, "])");
  return g;
}

namespace {

Pool2dGeometry pool_geometry(const Tensor& input, const Pool2dParams& p, const char* op) {
  check_pool_input(input, op);
  return nn_detail::pool2d_geometry(input.shape(), p, op);
}

Shape out_shape(const Tensor& input, int64_t OH, int64_t OW) {
  Shape s = input.shape();
  s[s.size() - 2] = OH;
  s[s.size() - 1] = OW;
  return s;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Pool2dParams p) {
  if (auto c = autocast_args(AutocastOp::max_pool2d, input)) return max_pool2d_with_indices((*c)[0], p);
  const Pool2dGeometry g = pool_geometry(input, p, "max_pool2d");
  Tensor x = raw(input);
  const Shape os = out_shape(input, g.OH, g.OW);
  Tensor out = empty(os, input.options());
  Tensor indices = empty(os, {DType::Int64, input.device()});
  max_pool2d_forward_stub(input.device())(out, indices, x, g);
  if (autograd::any_requires_grad({input})) {
    Shape in_shape = input.shape();
    // indices are a fresh tensor the caller may modify: keep our own reference to them
    SavedTensor si(indices);
    autograd::record("MaxPool2dBackward", {input}, {out}, [si, g, in_shape](const Grads& gr, const Needs&) -> Grads {
      Tensor go = raw(gr[0]);
      Tensor gi = empty(in_shape, go.options());
      max_pool2d_backward_stub(go.device())(gi, go, si.get(), g);
      return {gi};
    });
  }
  return {out, indices};
}

Tensor max_pool2d(const Tensor& input, Pool2dParams p) {
  return max_pool2d_with_indices(input, p).first;
}

Tensor max_pool2d(const Tensor& input, int64_t kernel) {
  Pool2dParams p;
  p.kernel = {kernel, kernel};
  p.stride = {kernel, kernel};
  return max_pool2d(input, p);
}

Tensor avg_pool2d(const Tensor& input, Pool2dParams p) {
  if (auto c = autocast_args(AutocastOp::avg_pool2d, input)) return avg_pool2d((*c)[0], p);
  const Pool2dGeometry g = pool_geometry(input, p, "avg_pool2d");
  Tensor x = raw(input);
  Tensor out = empty(out_shape(input, g.OH, g.OW), input.options());
  avg_pool2d_forward_stub(input.device())(out, x, g);
  Shape in_shape = input.shape();
  autograd::record("AvgPool2dBackward", {input}, {out}, [g, in_shape](const Grads& gr, const Needs&) -> Grads {
    Tensor go = raw(gr[0]);
    Tensor gi = empty(in_shape, go.options());
    avg_pool2d_backward_stub(go.device())(gi, go, g);
    return {gi};
  });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size) {
  if (auto c = autocast_args(AutocastOp::adaptive_avg_pool2d, input)) return adaptive_avg_pool2d((*c)[0], output_size);
  const char* op = "adaptive_avg_pool2d";
  check_pool_input(input, op);
  EMBER_CHECK(output_size[0] > 0 && output_size[1] > 0, op, ": output size must be positive, got [", output_size[0],
              ", ", output_size[1], "]");
  Pool2dGeometry g;
  g.H = input.size(-2), g.W = input.size(-1);
  g.P = input.numel() / (g.H * g.W);
  g.OH = output_size[0], g.OW = output_size[1];
  Tensor x = raw(input);
  Tensor out = empty(out_shape(input, g.OH, g.OW), input.options());
  adaptive_avg_pool2d_forward_stub(input.device())(out, x, g);
  Shape in_shape = input.shape();
  autograd::record("AdaptiveAvgPool2dBackward", {input}, {out}, [g, in_shape](const Grads& gr, const Needs&) -> Grads {
    Tensor go = raw(gr[0]);
    Tensor gi = empty(in_shape, go.options());
    adaptive_avg_pool2d_backward_stub(go.device())(gi, go, g);
    return {gi};
  });
  return out;
}

}  // namespace ember
