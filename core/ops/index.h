// Joining, splitting, indexing and ordering: cat, stack, split, chunk, index_select, gather,
// scatter, masked_fill, one_hot, pad, tril/triu, topk, sort, embedding lookup.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);  // index: int64/int32 1-D
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
// Out-of-place scatter: a copy of `a` with src written (or added) at index along dim.
Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor masked_fill(const Tensor& a, const Tensor& mask, double value);  // mask: bool, broadcast
Tensor one_hot(const Tensor& labels, int64_t num_classes = -1);         // int64 out

enum class PadMode { Constant, Reflect };
// pads: pairs (before, after) for the last dims, innermost first, as torch.nn.functional.pad.
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, PadMode mode = PadMode::Constant, double value = 0.0);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
Tensor triu(const Tensor& a, int64_t diagonal = 0);

// Values and int64 indices of the k largest (or smallest) along dim, sorted.
std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true);
std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false);
// weight [num, dim], indices any shape of int64/int32 -> indices.shape + [dim]. Rows equal to
// padding_idx (if >= 0) get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);

}  // namespace ember
