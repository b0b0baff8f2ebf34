// conv2d and conv_transpose2d: argument checks, output geometry and one autograd node each.
// conv_transpose2d is the adjoint of conv2d, so it runs on the same three kernels with the roles
// swapped: its forward is conv's backward-data, its input gradient is conv's forward, and its
// weight gradient is conv's weight gradient with input and output exchanged.
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/nn_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/nn.h"
#include "core/ops/nn_checks.h"
#include "core/ops/reduce.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
using nn_detail::raw;

namespace {

void check_pair(const std::array<int64_t, 2>& v, int64_t min, const char* op, const char* what) {
  EMBER_CHECK(v[0] >= min && v[1] >= min, op, ": ", what, " must be ", min == 0 ? "non-negative" : "positive",
              ", got [", v[0], ", ", v[1], "]");
}

// Checks shared by both ops: a 4-D float input and weight of one dtype and device, positive
// groups dividing the input channels.
void check_common(const Tensor& input, const Tensor& weight, int64_t groups, const char* op) {
  // float16/bfloat16 too: autocast runs convolutions in them (core/ops/autocast_table.h).
  nn_detail::check_defined(input, op, "input");
  EMBER_CHECK(is_floating(input.dtype()), op, ": input must be float32, float64, float16 or bfloat16, got ",
              dtype_name(input.dtype()));
  EMBER_CHECK(input.dim() == 4, op, ": expected a 4-D input [N, C, H, W], got shape ", shape_str(input.shape()));
  nn_detail::check_like_input(weight, input, op, "weight");
  EMBER_CHECK(weight.dim() == 4, op, ": expected a 4-D weight, got shape ", shape_str(weight.shape()));
  EMBER_CHECK(weight.size(2) > 0 && weight.size(3) > 0, op, ": kernel size must be positive (weight shape ",
              shape_str(weight.shape()), ")");
  EMBER_CHECK(groups >= 1, op, ": groups must be positive, got ", groups);
  EMBER_CHECK(input.size(1) % groups == 0, op, ": groups (", groups, ") must divide the input's ", input.size(1),
              " channels");
}

// The extent a dilated kernel covers.
int64_t span(int64_t k, int64_t d) {
  return d * (k - 1) + 1;
}

}  // namespace

ConvGeometry nn_detail::conv2d_geometry(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                        const Conv2dParams& p, const char* op) {
  check_common(input, weight, p.groups, op);
  check_pair(p.stride, 1, op, "stride");
  check_pair(p.dilation, 1, op, "dilation");
  check_pair(p.padding, 0, op, "padding");
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t OC = weight.size(0), KH = weight.size(2), KW = weight.size(3);
  EMBER_CHECK(weight.size(1) * p.groups == C, op, ": input has ", C, " channels but weight expects ",
              weight.size(1) * p.groups, " (weight shape ", shape_str(weight.shape()),
              p.groups > 1 ? ", groups " + std::to_string(p.groups) : std::string(), ")");
  EMBER_CHECK(OC % p.groups == 0, op, ": groups (", p.groups, ") must divide the weight's ", OC,
              " output channels (weight shape ", shape_str(weight.shape()), ")");
  nn_detail::check_channel_vector(bias, OC, input, op, "bias");

  ConvGeometry g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.OC = OC, g.KH = KH, g.KW = KW;
  g.sh = p.stride[0], g.sw = p.stride[1], g.dh = p.dilation[0], g.dw = p.dilation[1], g.groups = p.groups;
  const int64_t eh = span(KH, g.dh), ew = span(KW, g.dw);
  if (p.same_padding) {
    EMBER_CHECK(g.sh == 1 && g.sw == 1, op, ": same padding needs stride 1, got [", g.sh, ", ", g.sw, "]");
    EMBER_CHECK(p.padding[0] == 0 && p.padding[1] == 0, op,
                ": same padding and an explicit padding cannot both be given (padding [", p.padding[0], ", ",
                p.padding[1], "])");
    // PyTorch's split: the odd pixel of an even kernel's padding goes to the bottom/right.
    g.ph = (eh - 1) / 2, g.pw = (ew - 1) / 2;
    g.OH = H, g.OW = W;
  } else {
    g.ph = p.padding[0], g.pw = p.padding[1];
    EMBER_CHECK(eh <= H + 2 * g.ph && ew <= W + 2 * g.pw, op, ": kernel size ", eh, "x", ew,
                g.dh > 1 || g.dw > 1 ? " (dilated)" : "", " is larger than the padded input ", H + 2 * g.ph, "x",
                W + 2 * g.pw, " (input shape ", shape_str(input.shape()), ")");
    g.OH = (H + 2 * g.ph - eh) / g.sh + 1;
    g.OW = (W + 2 * g.pw - ew) / g.sw + 1;
  }
  EMBER_CHECK(g.OH > 0 && g.OW > 0, op, ": output size ", g.OH, "x", g.OW, " is empty (input shape ",
              shape_str(input.shape()), ")");
  return g;
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Conv2dParams p) {
  if (auto c = autocast_args(AutocastOp::conv2d, input, weight, bias)) return conv2d((*c)[0], (*c)[1], (*c)[2], p);
  const ConvGeometry g = nn_detail::conv2d_geometry(input, weight, bias, p, "conv2d");
  Tensor x = raw(input), w = raw(weight), b = raw(bias);
  Tensor out = empty({g.N, g.OC, g.OH, g.OW}, input.options());
  conv2d_forward_stub(input.device())(out, x, w, b, g);

  if (autograd::any_requires_grad({input, weight, bias})) {
    SavedTensor sx(x), sw(w);
    const bool has_bias = bias.defined();
    autograd::record("Conv2dBackward", {input, weight, bias}, {out},
                     [sx, sw, g, has_bias](const Grads& gr, const Needs& n) -> Grads {
                       Grads r(3);
                       Tensor go = raw(gr[0]);
                       Tensor xv = sx.get(), wv = sw.get();
                       if (n[0]) {
                         r[0] = empty(xv.shape(), xv.options());
                         conv2d_backward_input_stub(go.device())(r[0], go, wv, Tensor(), g);
                       }
                       const bool want_b = has_bias && n[2];
                       if (n[1] || want_b) {
                         Tensor gw = n[1] ? empty(wv.shape(), wv.options()) : Tensor();
                         Tensor gb = want_b ? empty({g.OC}, wv.options()) : Tensor();
                         conv2d_backward_weight_stub(go.device())(gw, gb, go, xv, g);
                         r[1] = gw;
                         r[2] = gb;
                       }
                       return r;
                     });
  }
  return out;
}

namespace {

// The bias gradient of conv_transpose2d: the output gradient summed per channel. The CPU's
// reductions have no 16-bit kernels (autocast runs sum in float32), so a 16-bit gradient, which a
// layer run under autocast gets, is summed in float32 and the sum rounded back to its dtype.
Tensor bias_gradient(const Tensor& go) {
  const DType dt = go.dtype();
  if (dt != DType::BFloat16 && dt != DType::Float16) return sum(go, {0, 2, 3});
  return sum(go.to(DType::Float32), {0, 2, 3}).to(dt);
}

}  // namespace

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, ConvTranspose2dParams p) {
  if (auto c = autocast_args(AutocastOp::conv_transpose2d, input, weight, bias))
    return conv_transpose2d((*c)[0], (*c)[1], (*c)[2], p);
  const char* op = "conv_transpose2d";
  check_common(input, weight, p.groups, op);
  check_pair(p.stride, 1, op, "stride");
  check_pair(p.dilation, 1, op, "dilation");
  check_pair(p.padding, 0, op, "padding");
  check_pair(p.output_padding, 0, op, "output_padding");
  for (int i = 0; i < 2; ++i)
    EMBER_CHECK(p.output_padding[i] < std::max(p.stride[i], p.dilation[i]), op, ": output_padding [",
                p.output_padding[0], ", ", p.output_padding[1],
                "] must be smaller than either the stride or the dilation (stride [", p.stride[0], ", ", p.stride[1],
                "], dilation [", p.dilation[0], ", ", p.dilation[1], "])");
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  EMBER_CHECK(weight.size(0) == C, op, ": input has ", C, " channels but weight expects ", weight.size(0),
              " (weight shape ", shape_str(weight.shape()), ", layout [in, out/groups, kh, kw])");
  const int64_t OC = weight.size(1) * p.groups, KH = weight.size(2), KW = weight.size(3);
  nn_detail::check_channel_vector(bias, OC, input, op, "bias");
  const int64_t OH = (H - 1) * p.stride[0] - 2 * p.padding[0] + span(KH, p.dilation[0]) + p.output_padding[0];
  const int64_t OW = (W - 1) * p.stride[1] - 2 * p.padding[1] + span(KW, p.dilation[1]) + p.output_padding[1];
  EMBER_CHECK(OH > 0 && OW > 0, op, ": output size ", OH, "x", OW, " is empty (input shape ", shape_str(input.shape()),
              ", weight shape ", shape_str(weight.shape()), ")");

  // The conv whose backward-data this is: from our output [N, OC, OH, OW] to our input.
  ConvGeometry g;
  g.N = N, g.C = OC, g.H = OH, g.W = OW, g.OC = C, g.KH = KH, g.KW = KW, g.OH = H, g.OW = W;
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.dh = p.dilation[0], g.dw = p.dilation[1], g.groups = p.groups;

  Tensor x = raw(input), w = raw(weight), b = raw(bias);
  Tensor out = empty({N, OC, OH, OW}, input.options());
  conv2d_backward_input_stub(input.device())(out, x, w, b, g);

  if (autograd::any_requires_grad({input, weight, bias})) {
    SavedTensor sx(x), sw(w);
    autograd::record("ConvTranspose2dBackward", {input, weight, bias}, {out},
                     [sx, sw, g](const Grads& gr, const Needs& n) -> Grads {
                       Grads r(3);
                       Tensor go = raw(gr[0]);
                       if (n[0]) {
                         Tensor wv = sw.get();
                         r[0] = empty({g.N, g.OC, g.OH, g.OW}, go.options());
                         conv2d_forward_stub(go.device())(r[0], go, wv, Tensor(), g);
                       }
                       if (n[1]) {
                         Tensor xv = sx.get();
                         r[1] = empty(sw.get().shape(), go.options());
                         conv2d_backward_weight_stub(go.device())(r[1], Tensor(), xv, go, g);
                       }
                       if (n[2]) r[2] = bias_gradient(go);
                       return r;
                     });
  }
  return out;
}

}  // namespace ember
