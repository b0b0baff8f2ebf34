#include "op_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

Tensor raw_bits(const Tensor& t) {
  const Tensor c = t.detach().to(Device::cpu()).contiguous();
  const auto* p = static_cast<const unsigned char*>(c.raw_data());
  const size_t size = c.itemsize();
  std::vector<int64_t> words;
  for (int64_t i = 0; i < c.numel(); ++i)
    for (size_t w = 0; w < size; w += 4) {
      uint32_t x = 0;
      std::memcpy(&x, p + static_cast<size_t>(i) * size + w, std::min<size_t>(4, size - w));
      words.push_back(x);
    }
  return from_vector<int64_t>(words, {static_cast<int64_t>(words.size())});
}

double accumulation_atol(DType dt, int64_t k, double largest) {
  const double unit = dt == DType::Float32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  return 2.0 * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))) * unit * largest;
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
    add_conv_rows(t);
    add_conv_pool_rows(t);
    add_linalg_rows(t);
    add_norm_rows(t);
    add_loss_rows(t);
    add_rnn_rows(t);
    add_gather_scatter_rows(t);
    add_reduce_grad_rows(t);
    add_compare_rows(t);
    add_copy_rows(t);
    add_gemm_rows(t);
    add_conv_tile_rows(t);
    add_batch_norm_rows(t);
    add_rnn_cell_rows(t);
    add_autocast_rows(t);
    return t;
  }();
  return table;
}

}  // namespace ember::ops_test
