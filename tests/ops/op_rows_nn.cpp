// Rows: GEMM, convolution, pooling, batch and layer norm, cross-entropy, dropout, recurrent layers
// (core/gemm_kernels.h, core/nn_kernels.h, core/rnn_kernels.h).
#include "op_table.h"

namespace ember::ops_test {

namespace {

void add_matmul_family_rows(std::vector<OpRow>& t) {
  t.push_back({"matmul",
               [](Generator& g) {
                 return Inputs{rn(g, {67, 45}), rn(g, {45, 71})};
               },
               [](const Inputs& x) { return matmul(x[0], x[1]); }});
  t.back().atol = accumulation_atol(DType::Float32, 45);  // sums of 45 products, as the next rows'
  t.push_back({"matmul_transposed",
               [](Generator& g) {
                 return Inputs{rn(g, {45, 67}), rn(g, {71, 45})};
               },
               [](const Inputs& x) { return matmul(x[0].t(), x[1].t()); }});
  t.back().atol = accumulation_atol(DType::Float32, 45);
  t.push_back({"matmul_empty_inner",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 0}), rn(g, {0, 3})};
               },
               [](const Inputs& x) { return matmul(x[0], x[1]); }});
  t.push_back({"matvec_dot",
               [](Generator& g) {
                 return Inputs{rn(g, {301}), rn(g, {301})};
               },
               [](const Inputs& x) { return dot(x[0], x[1]); }});
  t.push_back({"bmm",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 17, 29}), rn(g, {3, 29, 13})};
               },
               [](const Inputs& x) { return bmm(x[0], x[1]); }});
  t.push_back({"addmm",
               [](Generator& g) {
                 return Inputs{rn(g, {31}), rn(g, {19, 23}), rn(g, {23, 31})};
               },
               [](const Inputs& x) { return addmm(x[0], x[1], x[2]); }});
}

void add_conv_and_pooling_rows(std::vector<OpRow>& t) {
  t.push_back({"conv2d",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 5, 13, 11}), rn(g, {7, 5, 3, 3}), rn(g, {7})};
               },
               [](const Inputs& x) {
                 return conv2d(x[0], x[1], x[2], {.stride = {2, 1}, .padding = {1, 1}});
               }});
  t.back().atol = accumulation_atol(DType::Float32, 5 * 3 * 3);  // sums of C KH KW products
  t.push_back({"conv2d_mnist",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 1, 28, 28}), rn(g, {8, 1, 3, 3})};
               },
               [](const Inputs& x) { return conv2d(x[0], x[1]); }});
  t.push_back({"conv_transpose2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 6, 7, 9}), rn(g, {6, 4, 3, 3}), rn(g, {4})};
               },
               [](const Inputs& x) {
                 return conv_transpose2d(x[0], x[1], x[2], {.stride = {2, 2}, .padding = {1, 1}});
               }});
  t.push_back({"max_pool2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 13, 12})};
               },
               [](const Inputs& x) { return max_pool2d(x[0], 2); }});
  t.push_back({"max_pool2d_padded",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 11, 10})};
               },
               [](const Inputs& x) {
                 return max_pool2d(x[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
               }});
  t.push_back({"avg_pool2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 13, 12})};
               },
               [](const Inputs& x) {
                 return avg_pool2d(x[0], {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
               }});
  t.push_back({"adaptive_avg_pool2d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 13, 12})};
               },
               [](const Inputs& x) {
                 return adaptive_avg_pool2d(x[0], {5, 4});
               }});
}

void add_norm_and_cross_entropy_rows(std::vector<OpRow>& t) {
  t.push_back({"batch_norm_train",
               [](Generator& g) {
                 return Inputs{rn(g, {6, 5, 7, 3}), pos(g, {5}), rn(g, {5})};
               },
               [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }});
  t.push_back({"batch_norm_eval",
               [](Generator& g) {
                 return Inputs{rn(g, {4, 5, 3, 3}), pos(g, {5}), rn(g, {5}), rn(g, {5}), pos(g, {5})};
               },
               [](const Inputs& x) { return batch_norm(x[0], x[3], x[4], x[1], x[2], false); },
               2e-4,
               true,
               true,
               true,
               {3, 4}});
  t.push_back({"layer_norm",
               [](Generator& g) {
                 return Inputs{rn(g, {37, 53}), pos(g, {53}), rn(g, {53})};
               },
               [](const Inputs& x) { return layer_norm(x[0], {53}, x[1], x[2]); }});
  t.push_back({"layer_norm_no_affine",
               [](Generator& g) {
                 return Inputs{rn(g, {4, 6, 9})};
               },
               [](const Inputs& x) {
                 return layer_norm(x[0], {6, 9});
               }});
  t.push_back({"cross_entropy",
               [](Generator& g) {
                 return Inputs{rn(g, {29, 11}), ints(g, 0, 11, {29})};
               },
               [](const Inputs& x) { return cross_entropy(x[0], x[1]); }});
  t.push_back({"cross_entropy_weighted_smoothed_sum",
               [](Generator& g) {
                 return Inputs{rn(g, {13, 7}), ints(g, 0, 7, {13}), pos(g, {7})};
               },
               [](const Inputs& x) {
                 return cross_entropy(x[0], x[1],
                                      {.weight = x[2], .label_smoothing = 0.1, .reduction = Reduction::Sum});
               },
               2e-4,
               true,
               true,
               true,
               {2}});
}

void add_dropout_rows(std::vector<OpRow>& t) {
  // Dropout draws its own mask on each backend: the row checks the kept elements are x / (1 - p)
  // and the zeroed fraction, not which elements.
  t.push_back({"dropout_mask_scale", [](Generator& g) { return Inputs{pos(g, {8000})}; },
               [](const Inputs& x) {
                 Generator gen(5);
                 const Tensor y = dropout(x[0], 0.25, true, &gen);
                 const Tensor kept = ne(y, 0.0);
                 const Tensor err = amax(abs(where(kept, sub(y, div(x[0], 0.75)), zeros({}, y.options()))));
                 return stack({mean(kept.to(y.dtype())), err}).detach();
               },
               0.03, false, false, false});
  // A fresh generator of one seed per call: the same mask at every evaluation (finite differences
  // see the mask's scaling), and the same mask for a transposed input as for a contiguous one
  // (the harness's strided run): the mask follows the logical element order.
  t.push_back({"dropout_fixed_mask_2d",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 4})};
               },
               [](const Inputs& x) {
                 Generator gen(8);
                 return dropout(x[0], 0.5, true, &gen);
               }});
}

void add_recurrent_rows(std::vector<OpRow>& t) {
  auto rnn_case = [&](const std::string& name, RnnMode mode, int64_t gates, std::vector<int64_t> lengths,
                      bool reverse) {
    t.push_back({name,
                 [gates](Generator& g) {
                   const int64_t T = 6, B = 3, I = 5, H = 7;
                   return Inputs{rn(g, {T, B, I}),   rn(g, {gates * H, I}), rn(g, {gates * H, H}),
                                 rn(g, {gates * H}), rn(g, {gates * H}),    rn(g, {B, H})};
                 },
                 [mode, lengths, reverse](const Inputs& x) {
                   auto r = rnn_layer(mode, x[0], x[1], x[2], x[3], x[4], x[5], mode == RnnMode::Lstm ? x[5] : Tensor(),
                                      lengths, reverse);
                   return lengths.empty() ? r.output : r.h_n;
                 },
                 5e-4});
  };
  rnn_case("lstm", RnnMode::Lstm, 4, {}, false);
  rnn_case("gru", RnnMode::Gru, 3, {}, false);
  rnn_case("rnn_tanh", RnnMode::RnnTanh, 1, {}, false);
  rnn_case("lstm_padded", RnnMode::Lstm, 4, {6, 4, 1}, false);
  rnn_case("gru_reverse_padded", RnnMode::Gru, 3, {6, 5, 2}, true);
  rnn_case("rnn_relu", RnnMode::RnnRelu, 1, {}, false);
}

}  // namespace

void add_nn_rows(std::vector<OpRow>& t) {
  add_matmul_family_rows(t);
  add_conv_and_pooling_rows(t);
  add_norm_and_cross_entropy_rows(t);
  add_dropout_rows(t);
  add_recurrent_rows(t);
}

}  // namespace ember::ops_test
