// Rows: gather/scatter, index_select and embedding (index_add in their backward), masked_fill,
// one_hot, tril/triu, cat, pad (core/index_kernels.h).
#include "op_table.h"

namespace ember::ops_test {

void add_index_rows(std::vector<OpRow>& t) {
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

}  // namespace ember::ops_test
