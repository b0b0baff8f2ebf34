// Rows: the ops autocast runs in bfloat16 (core/ops/autocast_table.h's low-precision rows), each
// run under `autocast(device, BFloat16)` on float32 operands of that device, forward and
// backward. The reference is the float64 run, which autocast leaves alone (it never casts
// float64), so a bfloat16 kernel is held to the float64 result; the row asserts that its op did
// run in bfloat16. The result goes back to float32 inside the row so that the harness's upstream product and sum (the
// CPU has no bfloat16 reduction) run in float32, while the op's backward gets a bfloat16
// gradient, as in training. Shapes put k past kBf16MinK (64) where a layer's GEMMs take the
// bfloat16 kernel only from there (convolutions, the recurrent layer's input GEMM).
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/ops.h"
#include "core/ops/rnn.h"
#include "layers/functional.h"
#include "op_table.h"

namespace ember::ops_test {

// The op under autocast `low` on its operands' device, checked to have produced `low`, widened back.
OpRow autocast_row(DType low, const std::string& op, int64_t k, std::function<Inputs(Generator&)> inputs,
                   std::function<Tensor(const Inputs&)> f) {
  const bool f16 = low == DType::Float16;
  OpRow r{(f16 ? "autocast_f16_" : "autocast_bf16_") + op, std::move(inputs),
          [low, op, f = std::move(f)](const Inputs& x) {
            Tensor out;
            {
              autocast ac(x[0].device(), low);
              out = f(x);
            }
            if (x[0].dtype() == DType::Float32 && out.dtype() != low)
              throw std::logic_error(op + " under autocast " + dtype_name(low) + " gave " + dtype_name(out.dtype()));
            return out.to(x[0].dtype());
          }};
  // Each operand rounded to bfloat16 (2^-9 relative; float16 2^-12) makes each product off by up to
  // 2^-8 (2^-11) of itself; k such errors of products of standard normals (of order one) that do not
  // all go one way leave about sqrt(k) units: four times that as the floor for elements that cancel
  // to near zero (accumulation_atol's reasoning with the type's unit and typical products), the
  // type's own rounding (rtol) besides. The harness allows the input gradients five times both.
  const int unit = f16 ? -11 : -8;
  r.tol = 1.6e-2 / (f16 ? 8 : 1);
  r.atol = 4.0 * std::sqrt(static_cast<double>(k)) * std::ldexp(1.0, unit);
  r.gradcheck = false;  // the float64 run is the op's own float64 path, checked by its rows
  return r;
}

void add_autocast_rows(std::vector<OpRow>& t) {
  namespace F = nn::functional;
  // Each row in bfloat16 and in float16.
  auto both = [&t](const std::string& op, int64_t k, const std::function<Inputs(Generator&)>& inputs,
                   const std::function<Tensor(const Inputs&)>& f) {
    for (DType low : {DType::BFloat16, DType::Float16}) t.push_back(autocast_row(low, op, k, inputs, f));
  };
  both(
      "matmul", 70,
      [](Generator& g) {
        return Inputs{rn(g, {2, 5, 70}), rn(g, {70, 30})};
      },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  both(
      "mm", 90,
      [](Generator& g) {
        return Inputs{rn(g, {13, 90}), rn(g, {90, 37})};
      },
      [](const Inputs& x) { return mm(x[0], x[1]); });
  both(
      "bmm", 66,
      [](Generator& g) {
        return Inputs{rn(g, {3, 7, 66}), rn(g, {3, 66, 9})};
      },
      [](const Inputs& x) { return bmm(x[0], x[1]); });
  both(
      "addmm", 65,
      [](Generator& g) {
        return Inputs{rn(g, {11}), rn(g, {6, 65}), rn(g, {65, 11})};
      },
      [](const Inputs& x) { return addmm(x[0], x[1], x[2]); });
  both(
      "linear", 80,
      [](Generator& g) {
        return Inputs{rn(g, {3, 4, 80}), rn(g, {24, 80}), rn(g, {24})};
      },
      [](const Inputs& x) { return F::linear(x[0], x[1], x[2]); });
  // 8 channels x 3 x 3 = 72 terms per output; the weight gradient sums over 2 x 9 x 9 = 162.
  both(
      "conv2d", 162,
      [](Generator& g) {
        return Inputs{rn(g, {2, 8, 9, 9}), rn(g, {12, 8, 3, 3}), rn(g, {12})};
      },
      [](const Inputs& x) {
        return conv2d(x[0], x[1], x[2], {.padding = {1, 1}});
      });
  both(
      "conv_transpose2d", 162,
      [](Generator& g) {
        return Inputs{rn(g, {2, 12, 5, 5}), rn(g, {12, 8, 3, 3}), rn(g, {8})};
      },
      [](const Inputs& x) {
        return conv_transpose2d(x[0], x[1], x[2], {.stride = {2, 2}});
      });
  // An LSTM layer over 6 steps: input 70 wide (its GEMM in bfloat16), hidden 16.
  both(
      "lstm_layer", 96,
      [](Generator& g) {
        return Inputs{rn(g, {6, 3, 70}), mul(rn(g, {64, 70}), 0.1), mul(rn(g, {64, 16}), 0.2), rn(g, {64}),
                      rn(g, {64})};
      },
      [](const Inputs& x) {
        return rnn_layer(RnnMode::Lstm, x[0], x[1], x[2], x[3], x[4], Tensor(), Tensor()).output;
      });
  // A GRU layer run in reverse over sequences of lengths 5, 2 and 6 (its r gate multiplies the
  // recurrent product, a separate buffer from the input projection's gates); hidden 16, input 70.
  both(
      "gru_layer_reverse_lengths", 96,
      [](Generator& g) {
        return Inputs{rn(g, {6, 3, 70}), mul(rn(g, {48, 70}), 0.1), mul(rn(g, {48, 16}), 0.2), rn(g, {48}),
                      rn(g, {48})};
      },
      [](const Inputs& x) {
        return rnn_layer(RnnMode::Gru, x[0], x[1], x[2], x[3], x[4], Tensor(), Tensor(), {5, 2, 6}, true).output;
      });
}

}  // namespace ember::ops_test
