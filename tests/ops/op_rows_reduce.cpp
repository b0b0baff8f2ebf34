// Rows: reductions and their backward kernels, arg-reductions, softmax and logsumexp, norms,
// sort and topk (core/reduce_kernels.h).
#include <cmath>

#include "op_table.h"

namespace ember::ops_test {
namespace {

Tensor tied(Generator& g, Shape s) {  // integer-valued floats: many exact ties
  return randint(-3, 4, std::move(s), {.dtype = DType::Float32}, &g);
}
Tensor near_one(Generator& g, Shape s) {  // long products stay finite
  return add(mul(rand(std::move(s), {}, &g), 0.2), 0.9);
}

}  // namespace

void add_reduce_rows(std::vector<OpRow>& t) {
  using Make = std::function<Tensor(Generator&)>;
  auto row = [&](const std::string& name, Make make, std::function<Tensor(const Tensor&)> f, double tol = 2e-4,
                 bool grad = true) {
    t.push_back({name, [make](Generator& g) { return Inputs{make(g)}; }, [f](const Inputs& x) { return f(x[0]); }, tol,
                 grad, grad});
  };
  const Make plain = [](Generator& g) { return rn(g, {37, 53}); };
  const Make ties = [](Generator& g) { return tied(g, {37, 53}); };
  const Make empty_rows = [](Generator& g) { return rn(g, {0, 7}); };
  row("sum", plain, [](const Tensor& a) { return sum(a); });
  row("sum_dim0", plain, [](const Tensor& a) { return sum(a, {0}); });
  row("sum_empty_dim0", empty_rows, [](const Tensor& a) { return sum(a, {0}); });
  row(
      "sum_3d_dims02",
      [](Generator& g) {
        return rn(g, {5, 9, 13});
      },
      [](const Tensor& a) {
        return sum(a, {0, 2});
      });
  row("mean_dim1", plain, [](const Tensor& a) { return mean(a, {1}, true); });
  row("amax_dim1", plain, [](const Tensor& a) { return amax(a, {1}); });
  // Ties: the gradient is split among the tied elements by convention (the backends must agree),
  // which finite differences cannot check; the plain rows check the derivative.
  auto no_gradcheck = [&] { t.back().gradcheck = false; };
  row("amax_ties", ties, [](const Tensor& a) { return amax(a, {1}); });
  no_gradcheck();
  row("amin_all_ties", ties, [](const Tensor& a) { return amin(a); });
  no_gradcheck();
  row("max_dim1", plain, [](const Tensor& a) { return max(a, 1).first; });
  row("min_dim0", plain, [](const Tensor& a) { return min(a, 0, true).first; });
  row(
      "argmax_dim1_ties", ties, [](const Tensor& a) { return argmax(a, 1); }, 0.0, false);
  row(
      "argmin_dim0", plain, [](const Tensor& a) { return argmin(a, 0); }, 0.0, false);
  row("var_dim1", plain, [](const Tensor& a) { return var(a, {1}); });
  row("var_dim0", plain, [](const Tensor& a) { return var(a, {0}); });
  row("std_dim1", plain, [](const Tensor& a) { return ember::std(a, {1}); });
  row("norm", plain, [](const Tensor& a) { return norm(a); });
  row("norm_p1_dim1", plain, [](const Tensor& a) { return norm(a, 1.0, {1}); });
  row("norm_p3_dim0", plain, [](const Tensor& a) { return norm(a, 3.0, {0}); });
  row("norm_inf_ties", ties, [](const Tensor& a) { return norm(a, INFINITY, {1}); });
  no_gradcheck();
  row(
      "prod_dim0",
      [](Generator& g) {
        return near_one(g, {37, 53});
      },
      [](const Tensor& a) { return prod(a, 0); });
  row(
      "prod_long_rows_zeros",
      [](Generator& g) {
        Tensor x = near_one(g, {5, 300});
        return masked_fill(x, lt(rand({5, 300}, {}, &g), 0.004), 0.0);
      },
      [](const Tensor& a) { return prod(a, 1); });
  row("logsumexp", plain, [](const Tensor& a) { return logsumexp(a, {1}); });
  row("logsumexp_dim0", plain, [](const Tensor& a) { return logsumexp(a, {0}); });
  row("softmax", plain, [](const Tensor& a) { return softmax(a, 1); });
  row("softmax_dim0", plain, [](const Tensor& a) { return softmax(a, 0); });
  row("log_softmax", plain, [](const Tensor& a) { return log_softmax(a, 1); });
  row("sort_dim1", plain, [](const Tensor& a) { return sort(a, 1).first; });
  row("sort_dim0_descending", plain, [](const Tensor& a) { return sort(a, 0, true).first; });
  row(
      "sort_indices_ties", ties, [](const Tensor& a) { return sort(a, 1).second; }, 0.0, false);
  row(
      "sort_long_rows",
      [](Generator& g) {
        return rn(g, {2, 9000});
      },
      [](const Tensor& a) { return sort(a, 1).first; });
  row("topk_dim1", plain, [](const Tensor& a) { return topk(a, 5, 1).first; });
  row("topk_smallest_dim0", plain, [](const Tensor& a) { return topk(a, 3, 0, false).first; });
  row(
      "topk_long_rows",
      [](Generator& g) {
        return rn(g, {3, 20000});
      },
      [](const Tensor& a) { return topk(a, 100, 1).first; });
}

}  // namespace ember::ops_test
