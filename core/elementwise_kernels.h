// Kernel interface for elementwise ops. Operands arrive broadcast to the output's shape and
// already converted to the compute dtype (comparisons write bool outputs). Each device registers
// one kernel per family; the op enum picks the math inside it.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

enum class BinaryOp {
  Add,  // a + alpha * b
  Sub,  // a - alpha * b
  Mul,
  Div,
};

enum class UnaryOp {
  Neg,
};

// out may alias a (in-place ops).
using BinaryFn = void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha);
using UnaryFn = void(UnaryOp op, const Tensor& out, const Tensor& a, double p0, double p1);
EMBER_DECLARE_STUB(binary_stub, BinaryFn);
EMBER_DECLARE_STUB(unary_stub, UnaryFn);

}  // namespace ember
