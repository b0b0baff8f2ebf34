#include "op_table.h"

namespace ember::ops_test {

Tensor rn(Generator& g, Shape s) {
  return randn(std::move(s), {}, &g);
}
Tensor pos(Generator& g, Shape s) {
  return add(abs(randn(std::move(s), {}, &g)), 0.5);
}
Tensor ints(Generator& g, int64_t lo, int64_t hi, Shape s, DType dt) {
  return randint(lo, hi, std::move(s), {.dtype = dt}, &g);
}

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> table = [] {
    std::vector<OpRow> t;
    add_elementwise_rows(t);
    add_reduce_rows(t);
    add_nn_rows(t);
    add_index_rows(t);
    add_optim_rows(t);
    add_dtype_rows(t);
    add_size_rows(t);
    add_reduction_rows(t);
    add_sorting_rows(t);
    add_pooling_rows(t);
    add_gather_scatter_rows(t);
    add_reduce_grad_rows(t);
    return t;
  }();
  return table;
}

}  // namespace ember::ops_test
