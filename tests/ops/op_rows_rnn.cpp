// Rows: rnn_layer in every mode (tanh, relu, LSTM, GRU) with and without biases (and with either
// bias alone: GRU keeps b_hn apart), with and without initial states, forward and reversed, with
// variable lengths, at widths that leave vector and panel tails with the batch split across
// threads, and a 2-layer bidirectional stack as nn::LSTM/GRU compose it; each checked inside the
// row against PyTorch's equations composed step by step from matmul, sigmoid and tanh, output,
// final states and (where the row says) every gradient (tests/ops/composed.h); float32 forward and
// backward against float64; lengths all equal to T and transposed operands giving the same bits;
// and the op itself for finite differences. These rows took over tests/core's rnn comparisons
// with a per-step reference and its gradchecks (core/rnn_kernels.h).
#include <array>
#include <random>
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"
#include "test_helpers.h"

namespace ember::ops_test {
namespace {

int64_t gates_of(RnnMode m) {
  return m == RnnMode::Lstm ? 4 : m == RnnMode::Gru ? 3 : 1;
}

const char* mode_name(RnnMode m) {
  switch (m) {
    case RnnMode::RnnTanh:
      return "rnn_tanh";
    case RnnMode::RnnRelu:
      return "rnn_relu";
    case RnnMode::Lstm:
      return "lstm";
    default:
      return "gru";
  }
}

const RnnMode kModes[] = {RnnMode::RnnTanh, RnnMode::RnnRelu, RnnMode::Lstm, RnnMode::Gru};

struct Case {
  RnnMode mode = RnnMode::Lstm;
  int64_t T = 4, B = 3, I = 3, H = 2;
  bool b_ih = true, b_hh = true, init = true, reverse = false;
  std::vector<int64_t> lengths;
  double scale = 1.0;
  std::string name() const {
    std::string s = std::string(mode_name(mode)) + "_t" + std::to_string(T) + "b" + std::to_string(B) + "i" +
                    std::to_string(I) + "h" + std::to_string(H);
    s += b_ih && b_hh ? "_bias" : b_ih ? "_b_ih_only" : b_hh ? "_b_hh_only" : "_no_bias";
    s += init ? "_h0" : "";
    s += reverse ? "_reverse" : "";
    s += lengths.empty() ? "" : "_lengths";
    if (scale != 1.0) s += "_scale" + std::to_string(static_cast<int>(scale));
    return s;
  }
};

// The operands in the order rnn_layer takes them, those present only: x, w_ih, w_hh, then b_ih,
// b_hh, h0, c0 where the case has them. Weights in PyTorch's init range (1/sqrt(H)) times scale.
Inputs rnn_inputs(Generator& g, const Case& c, DType dt) {
  const int64_t GH = gates_of(c.mode) * c.H;
  const double w = c.scale / std::sqrt(static_cast<double>(c.H));
  auto u = [&](Shape s, double scale) {
    return mul(sub(mul(rand(std::move(s), {.dtype = DType::Float64}, &g), 2.0), 1.0), scale).to(dt);
  };
  Inputs in{u({c.T, c.B, c.I}, c.scale), u({GH, c.I}, w), u({GH, c.H}, w)};
  if (c.b_ih) in.push_back(u({GH}, w));
  if (c.b_hh) in.push_back(u({GH}, w));
  if (c.init) {
    in.push_back(u({c.B, c.H}, c.scale));
    if (c.mode == RnnMode::Lstm) in.push_back(u({c.B, c.H}, c.scale));
  }
  return in;
}

struct Operands {
  Tensor x, w_ih, w_hh, b_ih, b_hh, h0, c0;
};
Operands operands(const Inputs& in, const Case& c) {
  Operands o{in[0], in[1], in[2]};
  size_t k = 3;
  if (c.b_ih) o.b_ih = in[k++];
  if (c.b_hh) o.b_hh = in[k++];
  if (c.init) {
    o.h0 = in[k++];
    if (c.mode == RnnMode::Lstm) o.c0 = in[k++];
  }
  return o;
}

// output, h_n and c_n (LSTM) as one flat tensor.
Tensor flat_results(const RnnLayerResult& r) {
  std::vector<Tensor> parts{r.output.reshape({-1}), r.h_n.reshape({-1})};
  if (r.c_n.defined()) parts.push_back(r.c_n.reshape({-1}));
  return cat(parts, 0);
}

RnnLayerResult run_op(const Case& c, const Operands& o) {
  return rnn_layer(c.mode, o.x, o.w_ih, o.w_hh, o.b_ih, o.b_hh, o.h0, o.c0, c.lengths, c.reverse);
}

// One layer, one direction, as torch.nn.RNN/LSTM/GRU define it, step by step. Each sequence is
// processed over its own length (reversed: from its last valid step back to 0), which a gather
// along time turns into one loop over steps with the finished sequences masked: their state
// carries over and their outputs are zero.
RnnLayerResult run_composed(const Case& c, const Operands& o) {
  const int64_t T = c.T, B = c.B, H = c.H;
  const Device dev = o.x.device();
  std::vector<int64_t> order(static_cast<size_t>(T * B));  // the time step processed at step s
  std::vector<double> active(static_cast<size_t>(T * B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = c.lengths.empty() ? T : c.lengths[static_cast<size_t>(b)];
    for (int64_t s = 0; s < T; ++s) {
      order[static_cast<size_t>(s * B + b)] = c.reverse && s < len ? len - 1 - s : s;
      active[static_cast<size_t>(s * B + b)] = s < len ? 1.0 : 0.0;
    }
  }
  const Tensor index = from_vector(order, {T, B, 1}).to(dev);
  const Tensor on = ne(from_vector(active, {T, B, 1}).to(dev), 0.0);
  const Tensor xs = gather(o.x, 0, index.expand({T, B, c.I}));
  Tensor h = o.h0.defined() ? o.h0 : zeros({B, H}, o.x.options());
  Tensor cell = o.c0.defined() ? o.c0 : zeros({B, H}, o.x.options());
  const Tensor zero = zeros({}, o.x.options());
  std::vector<Tensor> outs;
  auto gate = [H](const Tensor& g, int64_t k) { return g.narrow(1, k * H, H); };
  for (int64_t s = 0; s < T; ++s) {
    Tensor gi = matmul(xs.select(0, s), o.w_ih.t()), gh = matmul(h, o.w_hh.t());
    if (o.b_ih.defined()) gi = add(gi, o.b_ih);
    if (o.b_hh.defined()) gh = add(gh, o.b_hh);
    Tensor hn, cn = cell;
    switch (c.mode) {
      case RnnMode::RnnTanh:
        hn = tanh(add(gi, gh));
        break;
      case RnnMode::RnnRelu:
        hn = relu(add(gi, gh));
        break;
      case RnnMode::Lstm: {
        const Tensor ig = sigmoid(add(gate(gi, 0), gate(gh, 0))), fg = sigmoid(add(gate(gi, 1), gate(gh, 1)));
        const Tensor gg = tanh(add(gate(gi, 2), gate(gh, 2))), og = sigmoid(add(gate(gi, 3), gate(gh, 3)));
        cn = add(mul(fg, cell), mul(ig, gg));
        hn = mul(og, tanh(cn));
        break;
      }
      case RnnMode::Gru: {
        const Tensor r = sigmoid(add(gate(gi, 0), gate(gh, 0))), z = sigmoid(add(gate(gi, 1), gate(gh, 1)));
        const Tensor n = tanh(add(gate(gi, 2), mul(r, gate(gh, 2))));
        hn = add(mul(rsub(z, 1.0), n), mul(z, h));
        break;
      }
    }
    const Tensor live = on.select(0, s);
    h = where(live, hn, h);
    cell = where(live, cn, cell);
    outs.push_back(where(live, hn, zero));
  }
  RnnLayerResult r;
  r.output = gather(stack(outs, 0), 0, index.expand({T, B, H}));
  r.h_n = h;
  if (c.mode == RnnMode::Lstm) r.c_n = cell;
  return r;
}

// B lengths in [1, T], mixed, at least one of them T.
std::vector<int64_t> spread_lengths(int64_t B, int64_t T) {
  std::vector<int64_t> l(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) l[static_cast<size_t>(b)] = b == 0 ? T : 1 + (b * 5) % T;
  return l;
}

std::vector<Case> all_variants(RnnMode mode, int64_t T, int64_t B, int64_t I, int64_t H,
                               const std::vector<int64_t>& lengths) {
  std::vector<Case> cases;
  for (bool bias : {true, false})
    for (bool init : {true, false})
      for (bool reverse : {false, true})
        for (bool var : {false, true})
          cases.push_back({mode, T, B, I, H, bias, bias, init, reverse, var ? lengths : std::vector<int64_t>{}});
  return cases;
}

// What nn::LSTM/GRU do for num_layers = 2, bidirectional: each layer runs forward and reversed on
// the same input with the same lengths (rnn_layer_bidirectional, or the composition once per
// direction), and the next layer reads both outputs joined along the features. Operands: x, then
// per (layer, direction) w_ih, w_hh, b_ih, b_hh, h0 (and c0 for LSTM).
Tensor stack_of(RnnMode mode, const Inputs& in, const std::vector<int64_t>& lengths, bool composed) {
  const bool lstm = mode == RnnMode::Lstm;
  const size_t per = lstm ? 6 : 5;
  Tensor layer_in = in[0];
  std::vector<Tensor> finals;
  for (int l = 0; l < 2; ++l) {
    std::vector<Tensor> outs;
    RnnDirectionWeights w[2];
    for (int dir = 0; dir < 2; ++dir) {
      const size_t k = 1 + static_cast<size_t>(l * 2 + dir) * per;
      w[dir] = {in[k], in[k + 1], in[k + 2], in[k + 3], in[k + 4], lstm ? in[k + 5] : Tensor()};
    }
    const auto both =
        composed ? std::array<RnnLayerResult, 2>{} : rnn_layer_bidirectional(mode, layer_in, w[0], w[1], lengths);
    for (int dir = 0; dir < 2; ++dir) {
      const Operands o{layer_in, w[dir].w_ih, w[dir].w_hh, w[dir].b_ih, w[dir].b_hh, w[dir].h0, w[dir].c0};
      const Case c{mode, layer_in.size(0), layer_in.size(1), layer_in.size(2), w[dir].w_hh.size(1), true, true,
                   true, dir == 1,         lengths};
      const RnnLayerResult r = composed ? run_composed(c, o) : both[static_cast<size_t>(dir)];
      outs.push_back(r.output);
      finals.push_back(r.h_n.reshape({-1}));
      if (r.c_n.defined()) finals.push_back(r.c_n.reshape({-1}));
    }
    layer_in = cat(outs, 2);
  }
  finals.insert(finals.begin(), layer_in.reshape({-1}));
  return cat(finals, 0);
}

}  // namespace

// The absolute part for a recurrent layer's outputs: each step's gates sum I + H products (inputs
// and states up to `scale`, weights up to scale / sqrt(H)), and the recurrence carries every
// step's rounding on to the next, T steps at most.
double rnn_atol(const Case& c, DType dt) {
  const double largest = std::max(1.0, c.scale * c.scale / std::sqrt(static_cast<double>(c.H)));
  return static_cast<double>(c.T) * accumulation_atol(dt, c.I + c.H, largest);
}

// Adds a row holding the layer of case c to its composition in dtype dt (rtol tol; gradcheck: by
// finite differences too; grad: also compare every gradient with the composition's, which the
// forward-only rows leave to the gradient rows of the same sizes; strided: also through the
// harness's strided layout). An object, so that each piece of the table names it once.
struct ComposedRnnRows {
  std::vector<OpRow>& rows;
  void operator()(const Case& c, DType dt, double tol, bool gradcheck, bool grad = true, bool strided = true) const {
    OpRow r{"rnn_layer_vs_composed_" + c.name() + "_" + dtype_name(dt),
            [c, dt](Generator& g) { return rnn_inputs(g, c, dt); },
            [c, tol = Tolerance{tol, rnn_atol(c, dt)}, grad](const Inputs& x) {
              const Operands o = operands(x, c);
              return checked_composed(
                  flat_results(run_op(c, o)), x,
                  [c](const Inputs& h) { return flat_results(run_composed(c, operands(h, c))); }, tol, grad);
            },
            tol};
    r.atol = rnn_atol(c, dt);
    r.gradcheck = gradcheck;
    r.grad = grad;
    r.strided = strided;
    rows.push_back(std::move(r));
  }
};

namespace {

void add_rnn_variant_rows(std::vector<OpRow>& t) {
  const ComposedRnnRows composed_row{t};
  // Every mode and option: biases, initial states, direction, variable lengths; float64 with
  // finite differences, and float32.
  for (RnnMode mode : kModes) {
    for (const Case& c : all_variants(mode, 5, 4, 3, 5, {5, 2, 4, 1})) {
      composed_row(c, DType::Float64, 1e-9, false, false);
      composed_row(c, DType::Float32, 2e-4, false, false);
    }
    for (const Case& c : all_variants(mode, 4, 3, 3, 2, {2, 4, 1})) {
      if (!c.b_ih && !c.init && c.lengths.empty()) continue;  // covered by the richer variants
      Case small = c;
      small.T = 4;
      composed_row(small, DType::Float64, 1e-9, true);
    }
    // Either bias alone (GRU folds them differently).
    for (bool ih : {true, false}) {
      Case c{mode, 4, 3, 3, 4, ih, !ih, true, true, {4, 1, 3}};
      composed_row(c, DType::Float64, 1e-9, true);
    }
    // H = 37 and I = 19 are no multiple of any vector or panel width, and the batch is large
    // enough for the recurrent loop to split the hidden units across threads; larger weights
    // drive the gates into saturation, where the float32 activations must still be accurate.
    Case wide{mode, 5, 192, 19, 37, true, true, true, true, spread_lengths(192, 5)};
    composed_row(wide, DType::Float32, 4e-5, false, false, false);
    wide.scale = 4.0;
    composed_row(wide, DType::Float32, 1e-4, false, false, false);
    wide.reverse = false;
    composed_row(wide, DType::Float64, 1e-9, false, false, false);
    // float32 backward at those widths against float64 (the float32 path has its own exp, tanh
    // and GEMM).
    Case back{mode, 5, 192, 11, 37, true, true, true, true, spread_lengths(192, 5), 1.5};
    t.push_back({"rnn_layer_float32_backward_" + back.name(),
                 [back](Generator& g) { return rnn_inputs(g, back, DType::Float32); },
                 [back](const Inputs& x) { return flat_results(run_op(back, operands(x, back))); }, 4e-6, true, false,
                 false});
  }
}

// ReLU by finite differences away from its kink, and layouts that must give the same bits.
void add_rnn_layout_rows(std::vector<OpRow>& t) {
  // ReLU away from its kink: positive weights and inputs keep every pre-activation clear of 0, so
  // the central differences are exact.
  {
    const Case c{RnnMode::RnnRelu, 4, 3, 3, 2, true, true, true, true, {3, 4, 2}};
    t.push_back({"rnn_layer_gradcheck_" + c.name() + "_positive",
                 [c](Generator& g) {
                   Inputs in = rnn_inputs(g, c, DType::Float32);
                   for (Tensor& x : in) x = add(abs(x), 0.1);
                   return in;
                 },
                 [c](const Inputs& x) { return flat_results(run_op(c, operands(x, c))); }});
  }
  // Lengths all equal to T give the same bits as no lengths; a batch-first input seen time-major
  // through a transpose and a column-major w_hh give the same bits as contiguous operands.
  {
    const Case c{RnnMode::Gru, 3, 2, 3, 4, true, true, true, true, {}};
    t.push_back({"rnn_layer_full_lengths_equal_no_lengths",
                 [c](Generator& g) { return rnn_inputs(g, c, DType::Float32); },
                 [c](const Inputs& x) {
                   const Operands o = operands(x, c);
                   Case full = c;
                   full.lengths = {3, 3};
                   return checked(flat_results(run_op(c, o)), flat_results(run_op(full, o)), x, 0.0, false);
                 },
                 2e-4, false, false});
  }
  {
    const Case c{RnnMode::Lstm, 4, 3, 5, 3, true, true, true, false, {4, 2, 3}};
    t.push_back({"rnn_layer_transposed_operands_equal_contiguous",
                 [c](Generator& g) { return rnn_inputs(g, c, DType::Float32); },
                 [c](const Inputs& x) {
                   Operands o = operands(x, c);
                   const Tensor want = flat_results(run_op(c, o));
                   o.x = o.x.transpose(0, 1).contiguous().transpose(0, 1);
                   o.w_hh = o.w_hh.t().contiguous().t();
                   return checked(flat_results(run_op(c, o)), want, x, 0.0, false);
                 },
                 2e-4, false, false});
  }
}

void add_rnn_stack_rows(std::vector<OpRow>& t) {
  // A 2-layer bidirectional stack with variable lengths, at one thread (the directions in turn) and
  // at two (on a CPU, at once: one thread each).
  for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh})
    for (int threads : {1, 2}) {
      const std::vector<int64_t> lengths{4, 2, 3};
      t.push_back({std::string("rnn_layer_vs_composed_two_layer_bidirectional_") + mode_name(mode) +
                       (threads == 1 ? "_one_thread" : "_two_threads"),
                   [mode](Generator& g) {
                     const bool lstm = mode == RnnMode::Lstm;
                     const int64_t T = 4, B = 3, I = 3, H = 2, GH = gates_of(mode) * H;
                     auto u = [&](Shape s, double scale) {
                       return mul(sub(mul(rand(std::move(s), {.dtype = DType::Float64}, &g), 2.0), 1.0), scale);
                     };
                     Inputs in{u({T, B, I}, 1.0)};
                     for (int l = 0; l < 2; ++l)
                       for (int dir = 0; dir < 2; ++dir) {
                         const int64_t in_size = l == 0 ? I : 2 * H;
                         for (const Shape& s : {Shape{GH, in_size}, Shape{GH, H}, Shape{GH}, Shape{GH}})
                           in.push_back(u(s, 0.6));
                         in.push_back(u({B, H}, 1.0));
                         if (lstm) in.push_back(u({B, H}, 1.0));
                       }
                     return in;
                   },
                   [mode, lengths, threads](const Inputs& x) {
                     const test_util::ScopedThreads scoped(threads);
                     return checked_composed(
                         stack_of(mode, x, lengths, false), x,
                         [mode, lengths](const Inputs& h) { return stack_of(mode, h, lengths, true); }, 1e-9);
                   },
                   1e-9});
    }
}

}  // namespace

void add_rnn_rows(std::vector<OpRow>& t) {
  add_rnn_variant_rows(t);
  add_rnn_layout_rows(t);
  add_rnn_stack_rows(t);
}

}  // namespace ember::ops_test
