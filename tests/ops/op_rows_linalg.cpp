// Rows: matrix products (core/gemm_kernels.h). The float32 GEMM over odd sizes on both sides of
// every vector and panel width, against the float64 reference (which runs another kernel, dgemm);
// in float64, every rank combination of matmul's NumPy semantics, strided, sliced, expanded and
// permuted operands, matrix-vector shapes and addmm's bias broadcasts, each checked inside the row
// against the same product composed from mul and sum (no GEMM), values and gradients
// (tests/ops/composed.h); and the ops themselves on small shapes for finite differences. These
// rows took over tests/core's linalg comparisons with loops and its gradchecks.
#include <string>
#include <utility>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

// NumPy-semantics matmul as a broadcast product summed over the contraction dim.
Tensor matmul_composed(const Tensor& a, const Tensor& b) {
  const Tensor A = a.dim() == 1 ? a.unsqueeze(0) : a;  // [..., n, k]
  const Tensor B = b.dim() == 1 ? b.unsqueeze(1) : b;  // [..., k, m]
  Tensor r = sum(mul(A.unsqueeze(A.dim()), B.unsqueeze(B.dim() - 2)), {-2});
  if (b.dim() == 1) r = r.select(r.dim() - 1, 0);
  if (a.dim() == 1) r = r.select(r.dim() - 1 - (b.dim() == 1 ? 0 : 1), 0);
  return r;
}

std::string shape_name(const Shape& s) {
  std::string r;
  for (int64_t d : s) {
    if (!r.empty()) r += 'x';
    r += std::to_string(d);
  }
  return r.empty() ? "scalar" : r;
}

Tensor rn64(Generator& g, Shape s) {
  return randn(std::move(s), {.dtype = DType::Float64}, &g);
}

// Adds float64 rows that hold the op `f` to its composition `ref` (values and gradients, to 1e-9).
// An object, so that each piece of the table names it once (`const ComposedMatmulRows
// composed_row{t};`) and adds rows with `composed_row(name, make, f, ref)`.
struct ComposedMatmulRows {
  std::vector<OpRow>& rows;
  void operator()(const std::string& name, std::function<Inputs(Generator&)> make,
                  std::function<Tensor(const Inputs&)> f, std::function<Tensor(const Inputs&)> ref) const {
    OpRow r{name, std::move(make), [f, ref](const Inputs& x) { return checked_composed(f(x), x, ref, 1e-9); }, 1e-9};
    r.gradcheck = false;  // the composition's gradients are the oracle
    rows.push_back(std::move(r));
  }
};

}  // namespace

namespace {

// sgemm over odd sizes, and matmul over every rank combination.
void add_matmul_rank_rows(std::vector<OpRow>& t) {
  const ComposedMatmulRows composed_row{t};
  // sgemm over odd sizes (the harness adds transposed operands, which reach BLAS as flags).
  const int64_t sizes[] = {1, 7, 33, 129};
  for (int64_t m : sizes)
    for (int64_t k : sizes)
      for (int64_t n : sizes) {
        OpRow r{"mm_float32_" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n),
                [m, k, n](Generator& g) {
                  return Inputs{rn(g, {m, k}), rn(g, {k, n})};
                },
                [](const Inputs& x) { return mm(x[0], x[1]); }};
        r.gradcheck = m * k + k * n <= 600;
        r.atol = accumulation_atol(DType::Float32, k);  // sums of k products
        t.push_back(std::move(r));
      }

  // float64 against the composition: every rank combination, with broadcast batches.
  using Pair = std::pair<Shape, Shape>;
  const std::vector<Pair> ranks = {{{5}, {5}},
                                   {{5}, {5, 3}},
                                   {{4, 5}, {5}},
                                   {{4, 5}, {5, 3}},
                                   {{2, 4, 5}, {5, 3}},
                                   {{4, 5}, {2, 5, 3}},
                                   {{2, 4, 5}, {2, 5, 3}},
                                   {{5}, {2, 5, 3}},
                                   {{2, 4, 5}, {5}},
                                   {{2, 1, 4, 5}, {3, 5, 2}},
                                   {{1, 4, 5}, {3, 5, 2}},
                                   {{3, 1, 2, 4, 5}, {1, 2, 1, 5, 3}},
                                   {{2, 3, 4, 5}, {2, 3, 5, 6}},
                                   {{2, 3, 4}, {1, 1, 4, 2}}};
  for (const auto& [sa, sb] : ranks) {
    composed_row(
        "matmul_vs_composed_" + shape_name(sa) + "_by_" + shape_name(sb),
        [sa = sa, sb = sb](Generator& g) {
          return Inputs{rn64(g, sa), rn64(g, sb)};
        },
        [](const Inputs& x) { return matmul(x[0], x[1]); },
        [](const Inputs& x) { return matmul_composed(x[0], x[1]); });
    // The op itself for finite differences (float32 rows: the gradcheck group runs them in float64).
    t.push_back({"matmul_" + shape_name(sa) + "_by_" + shape_name(sb),
                 [sa = sa, sb = sb](Generator& g) {
                   return Inputs{rn(g, sa), rn(g, sb)};
                 },
                 [](const Inputs& x) { return matmul(x[0], x[1]); }});
  }
}

void add_strided_operand_rows(std::vector<OpRow>& t) {
  const ComposedMatmulRows composed_row{t};
  // Operands BLAS cannot take as they are: rows sliced out of a wider matrix (a leading dimension
  // above the row), every other column (a copy), transposed slices, an expanded (stride 0) matrix.
  composed_row(
      "mm_vs_composed_sliced_operands",
      [](Generator& g) {
        return Inputs{rn64(g, {40, 50})};
      },
      [](const Inputs& x) {
        return cat({mm(x[0].slice(0, 3, 20).slice(1, 5, 30), x[0].slice(0, 0, 25).slice(1, 0, 50, 2)).reshape({-1}),
                    mm(x[0].slice(1, 0, 17).t(), x[0].slice(1, 20, 23)).reshape({-1})});
      },
      [](const Inputs& x) {
        return cat({matmul_composed(x[0].slice(0, 3, 20).slice(1, 5, 30), x[0].slice(0, 0, 25).slice(1, 0, 50, 2))
                        .reshape({-1}),
                    matmul_composed(x[0].slice(1, 0, 17).t(), x[0].slice(1, 20, 23)).reshape({-1})});
      });
  composed_row(
      "mm_vs_composed_expanded_operand",
      [](Generator& g) {
        return Inputs{rn64(g, {1, 6}), rn64(g, {6, 5})};
      },
      [](const Inputs& x) {
        return mm(x[0].expand({4, 6}), x[1]);
      },
      [](const Inputs& x) {
        return matmul_composed(x[0].expand({4, 6}), x[1]);
      });
  // Matrix-vector shapes (BLAS's gemv) with either operand transposed, and strided vectors.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const std::string tag = std::string(ta ? "_at" : "_a") + (tb ? "_bt" : "_b");
      composed_row(
          "mm_vs_composed_matrix_vector" + tag,
          [ta, tb](Generator& g) {
            return Inputs{ta ? rn64(g, {9, 13}) : rn64(g, {13, 9}), tb ? rn64(g, {1, 9}) : rn64(g, {9, 1}),
                          ta ? rn64(g, {13, 1}) : rn64(g, {1, 13}), tb ? rn64(g, {7, 13}) : rn64(g, {13, 7})};
          },
          [ta, tb](const Inputs& x) {
            const Tensor a = ta ? x[0].t() : x[0], v = tb ? x[1].t() : x[1];
            const Tensor row = ta ? x[2].t() : x[2], b = tb ? x[3].t() : x[3];
            return cat({mm(a, v).reshape({-1}), mm(row, b).reshape({-1})});
          },
          [ta, tb](const Inputs& x) {
            const Tensor a = ta ? x[0].t() : x[0], v = tb ? x[1].t() : x[1];
            const Tensor row = ta ? x[2].t() : x[2], b = tb ? x[3].t() : x[3];
            return cat({matmul_composed(a, v).reshape({-1}), matmul_composed(row, b).reshape({-1})});
          });
    }
  composed_row(
      "matmul_vs_composed_strided_vectors",
      [](Generator& g) {
        return Inputs{rn64(g, {20}), rn64(g, {4, 10})};
      },
      [](const Inputs& x) {
        const Tensor v = x[0].slice(0, 0, 20, 2);
        return cat({matmul(x[1], v), matmul(v, x[1].t())});
      },
      [](const Inputs& x) {
        const Tensor v = x[0].slice(0, 0, 20, 2);
        return cat({matmul_composed(x[1], v), matmul_composed(v, x[1].t())});
      });
}

void add_batch_and_addmm_rows(std::vector<OpRow>& t) {
  const ComposedMatmulRows composed_row{t};
  // Batches: transposed matrices, batch dims that do not coalesce (permuted), broadcast views, a
  // [B, T, K] x [K, N] product folded into one tall GEMM, and a sliced batch that must not fold.
  composed_row(
      "bmm_vs_composed_transposed_and_permuted",
      [](Generator& g) {
        return Inputs{rn64(g, {3, 6, 4}), rn64(g, {6, 3, 5})};
      },
      [](const Inputs& x) {
        return bmm(x[0].transpose(1, 2), x[1].permute({1, 0, 2}));
      },
      [](const Inputs& x) {
        return matmul_composed(x[0].transpose(1, 2), x[1].permute({1, 0, 2}));
      });
  composed_row(
      "matmul_vs_composed_permuted_batch_and_broadcast_view",
      [](Generator& g) {
        return Inputs{rn64(g, {2, 3, 4, 6}), rn64(g, {5, 6})};
      },
      [](const Inputs& x) {
        return matmul(x[0].permute({1, 0, 2, 3}), x[1].t().unsqueeze(0).expand({2, 6, 5}));
      },
      [](const Inputs& x) {
        return matmul_composed(x[0].permute({1, 0, 2, 3}), x[1].t().unsqueeze(0).expand({2, 6, 5}));
      });
  composed_row(
      "matmul_vs_composed_folded_batch",
      [](Generator& g) {
        return Inputs{rn64(g, {4, 5, 6}), rn64(g, {6, 3}), rn64(g, {4, 7, 6})};
      },
      [](const Inputs& x) {
        return cat({matmul(x[0], x[1]).reshape({-1}), matmul(x[2].slice(1, 1, 6), x[1]).reshape({-1}),
                    matmul(x[0], x[1].reshape({1, 1, 6, 3})).reshape({-1})});
      },
      [](const Inputs& x) {
        return cat({matmul_composed(x[0], x[1]).reshape({-1}), matmul_composed(x[2].slice(1, 1, 6), x[1]).reshape({-1}),
                    matmul_composed(x[0], x[1].reshape({1, 1, 6, 3})).reshape({-1})});
      });
  // addmm: every bias shape that broadcasts to the product, with beta and alpha; and transposed
  // operands with a 1-D bias.
  for (const Shape& bs : {Shape{5}, Shape{1, 5}, Shape{4, 1}, Shape{4, 5}, Shape{}}) {
    composed_row(
        "addmm_vs_composed_bias_" + shape_name(bs),
        [bs](Generator& g) {
          return Inputs{rn64(g, bs), rn64(g, {4, 3}), rn64(g, {3, 5})};
        },
        [](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.5, 2.0); },
        [](const Inputs& x) { return add(mul(x[0], 0.5), mul(matmul_composed(x[1], x[2]), 2.0)); });
  }
  for (const Shape& bs : {Shape{2}, Shape{3, 1}, Shape{3, 2}, Shape{}})
    t.push_back({"addmm_bias_" + shape_name(bs),
                 [bs](Generator& g) {
                   return Inputs{rn(g, bs), rn(g, {3, 4}), rn(g, {4, 2})};
                 },
                 [](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.7, -1.3); }});
  composed_row(
      "addmm_vs_composed_transposed_operands",
      [](Generator& g) {
        return Inputs{rn64(g, {4}), rn64(g, {3, 5}), rn64(g, {4, 3})};
      },
      [](const Inputs& x) { return addmm(x[0], x[1].t(), x[2].t()); },
      [](const Inputs& x) { return add(x[0], matmul_composed(x[1].t(), x[2].t())); });
  composed_row(
      "outer_and_dot_vs_composed",
      [](Generator& g) {
        return Inputs{rn64(g, {3}), rn64(g, {5}), rn64(g, {3})};
      },
      [](const Inputs& x) {
        return cat({outer(x[0], x[1]).reshape({-1}), dot(x[0], x[2]).reshape({1})});
      },
      [](const Inputs& x) {
        return cat({mul(x[0].unsqueeze(1), x[1].unsqueeze(0)).reshape({-1}), sum(mul(x[0], x[2])).reshape({1})});
      });
}

// Many small and a few large float32 products, and the ops through views by finite differences.
void add_batched_and_gradcheck_rows(std::vector<OpRow>& t) {
  // float32 batched products: many small ones and a few large ones.
  t.push_back({"bmm_float32_many_small",
               [](Generator& g) {
                 return Inputs{rn(g, {64, 8, 7}), rn(g, {64, 7, 9})};
               },
               [](const Inputs& x) { return bmm(x[0], x[1]); }, 2e-4, true, false});
  // atol 3e-5: each element adds K = 80 products of unit normals, sum |a_i b_i| about 51, and float32
  // rounds the partial sums by about sqrt(K) x 2^-24 x 51 = 3e-5 (the probabilistic bound); an
  // element that cancels to near zero has no relative accuracy to hold. OpenBLAS's Zen kernels on a
  // Zen 3 VM were 3.8e-6 off at an element of 0.0016, over the dtype's 1e-6 + 2e-4 |want|.
  t.push_back({"bmm_float32_large",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 70, 80}), rn(g, {3, 80, 90})};
               },
               [](const Inputs& x) { return bmm(x[0], x[1]); },
               2e-4,
               true,
               false,
               true,
               {},
               {},
               3e-5});
  t.push_back({"matmul_float32_batch_by_matrix",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 7, 6}), rn(g, {6, 4})};
               },
               [](const Inputs& x) { return matmul(x[0], x[1]); }});

  // The ops themselves through views, for finite differences: transposed operands, two views of
  // one input, a batch transposed against a transposed weight; mm, bmm, outer, dot, and a product
  // with a constant operand.
  t.push_back({"matmul_transposed_views",
               [](Generator& g) {
                 return Inputs{rn(g, {4, 3}), rn(g, {5, 4})};
               },
               [](const Inputs& x) { return matmul(x[0].t(), x[1].t()); }});
  t.push_back({"mm_two_views_of_one_input",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 6})};
               },
               [](const Inputs& x) { return mm(x[0].slice(1, 0, 6, 2), x[0].slice(1, 1, 4).t()); }});
  t.push_back({"matmul_batch_transposed_by_weight_transposed",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4, 2}), rn(g, {5, 4})};
               },
               [](const Inputs& x) { return matmul(x[0].transpose(1, 2), x[1].t()); }});
  t.push_back({"mm_small",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), rn(g, {4, 2})};
               },
               [](const Inputs& x) { return mm(x[0], x[1]); }});
  t.push_back({"bmm_small",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 4}), rn(g, {2, 4, 2})};
               },
               [](const Inputs& x) { return bmm(x[0], x[1]); }});
  t.push_back({"outer",
               [](Generator& g) {
                 return Inputs{rn(g, {3}), rn(g, {5})};
               },
               [](const Inputs& x) { return outer(x[0], x[1]); }});
  t.push_back({"dot_small",
               [](Generator& g) {
                 return Inputs{rn(g, {3}), rn(g, {3})};
               },
               [](const Inputs& x) { return dot(x[0], x[1]); }});
  t.push_back({"matmul_constant_operand",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), rn(g, {4, 2})};
               },
               [](const Inputs& x) { return matmul(x[0], x[1]); },
               2e-4,
               true,
               true,
               true,
               {1}});
}

}  // namespace

void add_linalg_rows(std::vector<OpRow>& t) {
  add_matmul_rank_rows(t);
  add_strided_operand_rows(t);
  add_batch_and_addmm_rows(t);
  add_batched_and_gradcheck_rows(t);
}

}  // namespace ember::ops_test
