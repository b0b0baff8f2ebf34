// Rows: gather/scatter, index_select and embedding (index_add in their backward), masked_fill,
// one_hot, tril/triu, cat, pad (core/index_kernels.h).
#include <string>
#include <utility>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {

namespace {

// Index tensors spelled out: the rows below need repeated and particular positions.
Tensor idx(std::vector<int64_t> v, Shape s) {
  return from_vector(v, std::move(s));
}

// Gather, scatter, index_select and embedding forward rows.
void add_gather_scatter_forward_rows(std::vector<OpRow>& t) {
  t.push_back({"gather",
               [](Generator& g) {
                 return Inputs{rn(g, {7, 13}), ints(g, 0, 13, {7, 4})};
               },
               [](const Inputs& x) { return gather(x[0], 1, x[1]); }});
  t.push_back({"gather_dim0_strided",
               [](Generator& g) {
                 return Inputs{rn(g, {7, 9}), ints(g, 0, 9, {13, 5})};
               },
               [](const Inputs& x) { return gather(x[0].t(), 0, x[1]); }});
  t.push_back({"scatter_add_short_fibers",
               [](Generator& g) {
                 return Inputs{rn(g, {6, 11}), ints(g, 0, 11, {6, 3}), rn(g, {7, 4})};
               },
               [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); }});
  t.push_back({"scatter_add_long_fibers",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 23}), ints(g, 0, 23, {2, 700}), rn(g, {2, 700})};
               },
               [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); }});
  // Repeated indices: which write wins is unspecified, so the row keeps one source value per index.
  t.push_back({"scatter_unique",
               [](Generator& g) {
                 return Inputs{rn(g, {19}), randperm(19, &g).narrow(0, 0, 11), rn(g, {11})};
               },
               [](const Inputs& x) { return scatter(x[0], 0, x[1], x[2]); }});
  t.push_back({"index_select",
               [](Generator& g) {
                 return Inputs{rn(g, {9, 17}), ints(g, 0, 17, {23})};
               },
               [](const Inputs& x) { return index_select(x[0], 1, x[1]); }});
  t.push_back({"embedding",
               [](Generator& g) {
                 return Inputs{rn(g, {17, 8}), ints(g, 0, 17, {5, 9})};
               },
               [](const Inputs& x) { return embedding(x[0], x[1]); }});
  t.push_back({"embedding_padding_idx",
               [](Generator& g) {
                 return Inputs{rn(g, {11, 6}), ints(g, 0, 11, {40})};
               },
               // The padding row's gradient is zero by definition, not the derivative: no finite differences.
               [](const Inputs& x) { return embedding(x[0], x[1], 3); }, 2e-4, true, false});
}

// masked_fill, one_hot, tril/triu, cat and pad.
void add_mask_triangle_join_rows(std::vector<OpRow>& t) {
  t.push_back({"masked_fill",
               [](Generator& g) {
                 return Inputs{rn(g, {7, 5, 33}), ints(g, 0, 2, {5, 1})};
               },
               [](const Inputs& x) { return masked_fill(x[0], ne(x[1], 0), -2.5); }, 0.0});
  t.push_back({"masked_fill_inplace",
               [](Generator& g) {
                 return Inputs{rn(g, {37, 53}), ints(g, 0, 2, {53})};
               },
               [](const Inputs& x) {
                 Tensor y = add(x[0], 0.0);
                 masked_fill_(y, ne(x[1], 0), 3.0);
                 return y;
               },
               0.0});
  t.push_back({"one_hot",
               [](Generator& g) {
                 return Inputs{ints(g, 0, 13, {5, 41})};
               },
               [](const Inputs& x) { return one_hot(x[0], 13); }, 0.0});
  t.push_back({"tril",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 9, 7})};
               },
               [](const Inputs& x) { return tril(x[0].transpose(1, 2), -1); }, 0.0});
  t.push_back({"triu",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 9, 7})};
               },
               [](const Inputs& x) { return triu(x[0], 2); }, 0.0});
  t.push_back({"cat",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 5}), rn(g, {4, 5})};
               },
               [](const Inputs& x) {
                 return cat({x[0], x[1]}, 0);
               },
               0.0});
  t.push_back({"cat_dim1_with_empty",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 5}), rn(g, {3, 0}), rn(g, {3, 2})};
               },
               [](const Inputs& x) {
                 return cat({x[0], x[1], x[2]}, 1);
               },
               0.0});
  t.push_back({"pad_reflect",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 6, 5})};
               },
               [](const Inputs& x) {
                 return pad(x[0], {2, 1, 1, 2}, PadMode::Reflect);
               },
               0.0});
}

void add_join_split_gradcheck_rows(std::vector<OpRow>& t) {
  // Finite differences of the joins, splits and index ops on small inputs, through transposed
  // pieces, empty pieces, unused pieces and repeated indices (tests/core's gradchecks).
  t.push_back({"gradcheck_cat_with_transposed_piece",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3}), rn(g, {2, 1}), rn(g, {3, 2})};
               },
               [](const Inputs& x) {
                 return cat({x[0], x[1], x[2].t()}, 1);
               }});
  t.push_back({"gradcheck_cat_with_constant_and_empty_pieces",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3}), rn(g, {2, 3})};
               },
               [](const Inputs& x) {
                 return cat({x[1], x[0], zeros({0}, x[0].options())}, 0);
               },
               2e-4,
               true,
               true,
               true,
               {1}});
  t.push_back({"gradcheck_stack_with_transposed_piece",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3}), rn(g, {3, 2})};
               },
               [](const Inputs& x) {
                 return stack({x[0], x[1].t(), x[0]}, 1);
               }});
  // Pieces used unevenly (one not at all) still give the full gradient shape.
  t.push_back({"gradcheck_split_pieces_used_unevenly",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 3})};
               },
               [](const Inputs& x) {
                 auto p = split(x[0], 2);
                 return cat({mul(p[0], 2.0), p[2]});
               }});
  t.push_back({"gradcheck_chunk_of_a_transposed_view",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 3})};
               },
               [](const Inputs& x) {
                 auto p = chunk(x[0].t(), 2, 1);
                 return mul(p[0].slice(1, 0, 2), p[1]);
               }});
  t.push_back({"gradcheck_split_sizes_with_an_empty_piece",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 3})};
               },
               [](const Inputs& x) {
                 auto p = split(x[0], {1, 0, 2}, 1);
                 return add(p[0], p[2].slice(1, 1, 2));
               }});
}

// Index ops with repeated and transposed indices, and masked_fill's gradients.
void add_index_gradcheck_rows(std::vector<OpRow>& t) {
  t.push_back({"gradcheck_index_select_repeated",
               [](Generator& g) {
                 return Inputs{rn(g, {4, 3}), idx({3, 0, 3, 3}, {4})};
               },
               [](const Inputs& x) { return index_select(x[0], 0, x[1]); }});
  t.push_back({"gradcheck_index_select_transposed",
               [](Generator& g) {
                 return Inputs{rn(g, {4, 3}), idx({1, 1, 2}, {3})};
               },
               [](const Inputs& x) { return index_select(x[0].t(), 1, x[1]); }});
  t.push_back({"gradcheck_gather_dim1",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), idx({0, 0, 3, 1, 2, 1}, {3, 2})};
               },
               [](const Inputs& x) { return gather(x[0], 1, x[1]); }});
  t.push_back({"gradcheck_gather_transposed_dim0",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), idx({2, 2, 0, 1, 0, 0}, {2, 3})};
               },
               [](const Inputs& x) { return gather(x[0].t(), 0, x[1]); }});
  // Distinct positions per row for scatter (which write wins among repeats is unspecified);
  // repeats for scatter_add, also through transposed operands.
  t.push_back({"gradcheck_scatter_distinct",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), idx({2, 0, 1, 0}, {2, 2}), rn(g, {2, 5})};
               },
               [](const Inputs& x) { return scatter(x[0], 1, x[1], x[2]); }});
  t.push_back({"gradcheck_scatter_add_repeats",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), idx({3, 3, 1, 3, 0, 0}, {2, 3}), rn(g, {2, 5})};
               },
               [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); }});
  t.push_back({"gradcheck_scatter_add_transposed",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), idx({3, 3, 1, 3, 0, 0}, {2, 3}), rn(g, {2, 5})};
               },
               [](const Inputs& x) { return scatter_add(x[0].t(), 0, x[1].t(), x[2].t()); }});
  t.push_back({"gradcheck_masked_fill_broadcast_mask",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3}), idx({1, 0, 1}, {3})};
               },
               [](const Inputs& x) { return masked_fill(x[0], ne(x[1], 0), 5.0); }});
  t.push_back({"gradcheck_masked_fill_mask_broadcasts_the_result",
               [](Generator& g) {
                 return Inputs{rn(g, {3}), idx({0, 1}, {2, 1})};
               },
               [](const Inputs& x) { return masked_fill(x[0], ne(x[1], 0), 5.0); }});
  // float64: out of place with a broadcast mask, and in place; the gradient is masked too.
  t.push_back({"masked_fill_float64",
               [](Generator& g) {
                 return Inputs{randn({5, 7}, {.dtype = DType::Float64}, &g), ints(g, 0, 2, {7})};
               },
               [](const Inputs& x) {
                 Tensor y = masked_fill(x[0], ne(x[1], 0), -1.5);
                 return masked_fill_(y, gt(x[0], 1.0), 2.0);
               },
               0.0});
}

// Pads, triangles, sorts and embedding by finite differences; topk against sort.
void add_pad_triangle_sort_gradcheck_rows(std::vector<OpRow>& t) {
  // pad: constant with a value, negative (cropping) pads, reflection, of a transposed view.
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> pads = {
      {"constant_value",
       [](const Tensor& a) {
         return pad(a, {1, 2, 0, 1}, PadMode::Constant, 3.0);
       }},
      {"cropping",
       [](const Tensor& a) {
         return pad(a, {-1, 2, 1, -2});
       }},
      {"cropping_both_sides",
       [](const Tensor& a) {
         return pad(a, {-2, -1});
       }},
      {"reflect_three_dims",
       [](const Tensor& a) {
         return pad(a, {2, 3, 1, 2, 1, 1}, PadMode::Reflect);
       }},
      {"reflect_transposed",
       [](const Tensor& a) {
         return pad(a.transpose(1, 2), {1, 1}, PadMode::Reflect);
       }},
  };
  for (const auto& [name, f] : pads)
    t.push_back({std::string("gradcheck_pad_") + name,
                 [](Generator& g) {
                   return Inputs{rn(g, {2, 3, 4})};
                 },
                 [f = f](const Inputs& x) { return f(x[0]); }});
  t.push_back({"gradcheck_tril_diagonal1",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 4})};
               },
               [](const Inputs& x) { return tril(x[0], 1); }});
  t.push_back({"gradcheck_triu_transposed_diagonal_minus1",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 4})};
               },
               [](const Inputs& x) { return triu(x[0].transpose(1, 2), -1); }});
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> sorts = {
      {"sort_dim1", [](const Tensor& a) { return sort(a, 1).first; }},
      {"sort_transposed_descending", [](const Tensor& a) { return sort(a.t(), 1, true).first; }},
      {"topk2_dim0", [](const Tensor& a) { return topk(a, 2, 0).first; }},
      {"topk3_smallest", [](const Tensor& a) { return topk(a, 3, -1, false).first; }},
  };
  for (const auto& [name, f] : sorts)
    t.push_back({std::string("gradcheck_") + name,
                 [](Generator& g) {
                   return Inputs{rn(g, {3, 5})};
                 },
                 [f = f](const Inputs& x) { return f(x[0]); }});
  t.push_back({"gradcheck_embedding_repeated_indices",
               [](Generator& g) {
                 return Inputs{rn(g, {5, 3}), idx({4, 0, 4, 2, 4, 1}, {3, 2})};
               },
               [](const Inputs& x) { return embedding(x[0], x[1]); }});
  // topk of a long row is the head of a full descending sort: values and indices (exactly).
  t.push_back({"topk_equals_the_head_of_sort_1000",
               [](Generator& g) { return Inputs{randn({1000}, {.dtype = DType::Float64}, &g)}; },
               [](const Inputs& x) {
                 auto [tv, ti] = topk(x[0], 17);
                 auto [sv, si] = sort(x[0], 0, true);
                 return cat({checked(tv, sv.slice(0, 0, 17), x, 0.0),
                             checked(ti, si.slice(0, 0, 17), x, 0.0).to(DType::Float64)});
               },
               0.0});
}

}  // namespace

void add_index_rows(std::vector<OpRow>& t) {
  add_gather_scatter_forward_rows(t);
  add_mask_triangle_join_rows(t);
  add_join_split_gradcheck_rows(t);
  add_index_gradcheck_rows(t);
  add_pad_triangle_sort_gradcheck_rows(t);
}

}  // namespace ember::ops_test
