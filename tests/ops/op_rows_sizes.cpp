// Rows: the row-wise kernels (softmax, log_softmax and logsumexp; layer norm; the fused
// softmax-cross-entropy) at sizes on both sides of the warp (32) and the block (256), reduced
// dims in the middle and last, one-element and empty ones, in float32 and float64, with the
// values their kernels special-case: large logits and -inf entries, all -inf rows, rows far from
// zero, ignored targets (core/reduce_kernels.h, core/nn_kernels.h). These rows took over tests/emu's
// softmax, layer norm and cross-entropy checks.
#include <cmath>
#include <string>
#include <vector>

#include "op_table.h"

namespace ember::ops_test {
namespace {

std::string sizes_name(const Shape& s) {
  std::string r;
  for (int64_t d : s) {
    if (!r.empty()) r += 'x';
    r += std::to_string(d);
  }
  return r;
}

}  // namespace

namespace {

void add_softmax_size_rows(std::vector<OpRow>& t) {
  // softmax, log_softmax and logsumexp over dim 1 of [outer, n, inner]: rows (inner 1) and
  // columns (inner > 1), n below and above a warp and a block; entries 3 and 4 of each reduced
  // row are large (must not overflow) and -inf.
  const std::vector<Shape> shapes = {{3, 10, 1}, {2, 37, 1}, {2, 1000, 1}, {1, 1, 1}, {2, 7, 5}, {3, 33, 40}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Shape& s : shapes) {
      auto make = [dt, s](Generator& g) {
        Tensor x = mul(randn(s, {.dtype = DType::Float64}, &g), 5.0);
        if (s[1] > 5) {
          x.select(1, 3).fill_(dt == DType::Float32 ? 80.0 : 700.0);
          x.select(1, 4).fill_(-INFINITY);
        }
        return Inputs{x.to(dt)};
      };
      const std::string tag = std::string(dtype_name(dt)) + "_" + sizes_name(s);
      // With -inf inputs finite differences mean nothing; the plain rows check the derivatives.
      for (bool log : {false, true}) {
        OpRow r{std::string(log ? "log_softmax_" : "softmax_") + tag, make,
                [log](const Inputs& x) { return log ? log_softmax(x[0], 1) : softmax(x[0], 1); }};
        r.gradcheck = false;
        t.push_back(std::move(r));
      }
      OpRow l{"logsumexp_" + tag, make, [](const Inputs& x) { return logsumexp(x[0], {1}); }};
      l.gradcheck = false;
      t.push_back(std::move(l));
    }
  }
  // logsumexp of rows that are all -inf (-inf, gradient 0) and of an empty dim (-inf).
  for (const Shape& s : {Shape{2, 40, 1}, Shape{2, 40, 3}, Shape{2, 0, 1}}) {
    OpRow r{"logsumexp_all_minus_inf_" + sizes_name(s), [s](Generator&) { return Inputs{full(s, -INFINITY)}; },
            [](const Inputs& x) { return logsumexp(x[0], {1}); }, 0.0};
    r.gradcheck = false;
    t.push_back(std::move(r));
  }
}

void add_layer_norm_size_rows(std::vector<OpRow>& t) {
  // Layer norm over rows shorter and longer than a warp and not multiples of the block, rows far
  // from zero (where E[x^2] - E[x]^2 would cancel), enough rows (130) to split the weight and bias
  // gradients into row slices, with and without affine parameters.
  const std::vector<std::pair<int64_t, int64_t>> ln_shapes = {{1, 1}, {3, 7}, {5, 33}, {2, 100}, {4, 600}, {130, 24}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (auto [M, D] : ln_shapes) {
      for (bool affine : {true, false}) {
        const std::string name = std::string("layer_norm_") + dtype_name(dt) + "_" + std::to_string(M) + "x" +
                                 std::to_string(D) + (affine ? "_affine" : "");
        OpRow r{name,
                [dt, M = M, D = D, affine](Generator& g) {
                  Inputs in{add(mul(randn({M, D}, {.dtype = DType::Float64}, &g), 3.0), 50.0).to(dt)};
                  if (affine) in.push_back(randn({D}, {.dtype = dt}, &g)), in.push_back(randn({D}, {.dtype = dt}, &g));
                  return in;
                },
                [D = D, affine](const Inputs& x) {
                  return affine ? layer_norm(x[0], {D}, x[1], x[2]) : layer_norm(x[0], {D});
                }};
        r.gradcheck = M * D <= 600;
        t.push_back(std::move(r));
      }
    }
  }
  // Only the weight's gradient wanted (the input and the bias are constants).
  t.push_back({"layer_norm_weight_gradient_alone",
               [](Generator& g) {
                 return Inputs{rn(g, {6, 45}), rn(g, {45}), rn(g, {45})};
               },
               [](const Inputs& x) { return layer_norm(x[0], {45}, x[1], x[2]); },
               2e-4,
               true,
               true,
               true,
               {0, 2}});
  // No rows: the forward writes nothing and the weight and bias gradients are zero, not the
  // poison of fresh device memory (the sums add a gradient of one to both).
  t.push_back({"layer_norm_empty_rows",
               [](Generator& g) {
                 return Inputs{rn(g, {0, 5}), rn(g, {5}), rn(g, {5})};
               },
               [](const Inputs& x) { return add(sum(layer_norm(x[0], {5}, x[1], x[2])), add(sum(x[1]), sum(x[2]))); }});
}

void add_cross_entropy_size_rows(std::vector<OpRow>& t) {
  // Cross-entropy over [N, C, S] logits: class counts below and above a warp and a block's worth
  // of work, a spatial dim, class and probability targets, class weights, label smoothing, and an
  // ignored sample (class targets); the mean's divisor and the broadcast grad_loss in the backward.
  struct Ce {
    int64_t N, C, S;
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Ce& k : {Ce{9, 10, 1}, Ce{5, 37, 1}, Ce{3, 70, 1}, Ce{4, 5, 3}}) {
      for (bool prob : {false, true}) {
        for (bool weighted : {false, true}) {
          for (double ls : {0.0, 0.1}) {
            if (prob && ls > 0) continue;  // the op smooths probability targets itself
            const std::string name = std::string("cross_entropy_") + dtype_name(dt) + "_" + std::to_string(k.N) + "x" +
                                     std::to_string(k.C) + "x" + std::to_string(k.S) + (prob ? "_prob" : "_class") +
                                     (weighted ? "_weighted" : "") + (ls > 0 ? "_smoothed" : "");
            OpRow r{name,
                    [dt, k, prob, weighted](Generator& g) {
                      Inputs in{mul(randn({k.N, k.C, k.S}, {.dtype = DType::Float64}, &g), 3.0).to(dt)};
                      if (prob) {
                        in.push_back(softmax(randn({k.N, k.C, k.S}, {.dtype = dt}, &g), 1));
                      } else {
                        std::vector<double> v =
                            randint(0, k.C, {k.N, k.S}, {.dtype = DType::Float64}, &g).to_vector<double>();
                        v[1] = -100;  // one ignored sample
                        in.push_back(from_vector<double>(v, {k.N, k.S}).to(DType::Int64));
                      }
                      if (weighted) in.push_back(add(rand({k.C}, {.dtype = DType::Float64}, &g), 0.5).to(dt));
                      return in;
                    },
                    [weighted, ls](const Inputs& x) {
                      return cross_entropy(x[0], x[1], {.weight = weighted ? x[2] : Tensor(), .label_smoothing = ls});
                    }};
            if (weighted) r.constants = {2};
            r.gradcheck = k.N * k.C * k.S <= 210;
            t.push_back(std::move(r));
          }
        }
      }
    }
  }
}

}  // namespace

void add_size_rows(std::vector<OpRow>& t) {
  add_softmax_size_rows(t);
  add_layer_norm_size_rows(t);
  add_cross_entropy_size_rows(t);
}

}  // namespace ember::ops_test
