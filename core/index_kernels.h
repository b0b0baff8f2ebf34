// Kernel interface for the indexing, masking and ordering ops of core/ops/index.h. The op layer
// checks shapes and dtypes, converts index tensors to contiguous int64, checks their range with
// index_range_stub (so kernels may trust every index), allocates the outputs and records
// autograd; the kernels only move data. Every kernel that accumulates does so in a fixed order,
// so results are bit-for-bit reproducible on the CPU.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

// min and max of a contiguous int64 tensor with at least one element, returned to the host (a
// device backend synchronises here: the op layer needs them to reject bad indices).
using IndexRangeFn = void(const Tensor& index, int64_t* min, int64_t* max);

// out (contiguous) = src (contiguous) indexed along dim by a 1-D index: out.size(dim) == index.numel().
using IndexSelectFn = void(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& index);
// The adjoint of index_select: out (contiguous) += src (contiguous) scattered along dim, summing
// repeated indices in index order.
using IndexAddFn = void(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

// out (contiguous, index's shape) = src[..., index[i], ...] along dim; src and index may be strided.
using GatherFn = void(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& index);
// out[..., index[i], ...] = src[i] (or += when accumulate) along dim for every position i of
// index; out is contiguous and already holds the values being scattered into; src may be strided
// and larger than index. Repeated indices resolve in index order (the last write wins).
using ScatterFn = void(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate);

// out = mask ? value : a, with a and mask (bool) already broadcast to out's shape.
using MaskedFillFn = void(const Tensor& out, const Tensor& a, const Tensor& mask, double value);
// out (contiguous int64 [n, classes]) = one-hot rows of labels (contiguous int64 [n]).
using OneHotFn = void(const Tensor& out, const Tensor& labels);
// out (contiguous) = a with the elements below (upper) or above (lower) the diagonal zeroed, over
// the last two dims; a may be strided.
using TriluFn = void(const Tensor& out, const Tensor& a, int64_t diagonal, bool upper);
// values and indices (contiguous, a's shape but k = values.size(dim) along dim) = the k smallest
// (or largest) elements of a along dim in order; ties keep index order, NaN counts as the
// largest value.
using SortFn = void(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim, bool largest);

EMBER_DECLARE_STUB(index_range_stub, IndexRangeFn);
EMBER_DECLARE_STUB(index_select_stub, IndexSelectFn);
EMBER_DECLARE_STUB(index_add_stub, IndexAddFn);
EMBER_DECLARE_STUB(gather_stub, GatherFn);
EMBER_DECLARE_STUB(scatter_stub, ScatterFn);
EMBER_DECLARE_STUB(masked_fill_stub, MaskedFillFn);
EMBER_DECLARE_STUB(one_hot_stub, OneHotFn);
EMBER_DECLARE_STUB(trilu_stub, TriluFn);
EMBER_DECLARE_STUB(sort_stub, SortFn);

}  // namespace ember
