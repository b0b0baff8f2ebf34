// Kernel interface for reductions. The op layer hands the kernel an input whose reduced dims have
// been moved last and made contiguous, viewed as [outer, inner]: the kernel reduces each row.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

enum class ReduceOp { Sum };

// in: contiguous [outer, inner]; out: contiguous [outer].
using ReduceFn = void(ReduceOp op, const Tensor& out, const Tensor& in);
EMBER_DECLARE_STUB(reduce_stub, ReduceFn);

}  // namespace ember
