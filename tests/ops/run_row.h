// Running one row of the op table on one backend, and the float64 CPU reference it is compared
// with.
#pragma once

#include <string>
#include <vector>

#include "backends.h"
#include "op_table.h"

namespace ember::ops_test {

struct RowResult {
  Tensor out;                 // on the CPU, as the op returned it
  std::vector<Tensor> grads;  // per input: on the CPU, undefined where the input has none
};

// Whether input i of the row is one of its constants (gets no gradient).
bool is_constant(const OpRow& row, size_t i);
// The row's inputs, made from a generator seeded by the row's name (the same on every backend).
Inputs make_inputs(const OpRow& row);
// The row run on the CPU at the default level with floating inputs in float64 (the reference), or
// in the row's own dtypes where row.float64_reference is false; the upstream gradient is a fixed
// random tensor of the output's shape.
const RowResult& reference(const OpRow& row);
// The row run on `device` (inputs copied there, each of dim >= 2 as a non-contiguous view when
// `strided`), forward and, when the row has gradients, backward with the reference's upstream.
RowResult run_on(const OpRow& row, Device device, bool strided);

// Empty when `got` matches `want` within row-style tolerance (max |got - want| relative to
// max(1, max |want|), NaN where NaN, the same shape); otherwise what differs.
std::string mismatch(const Tensor& got, const Tensor& want, double tol);

}  // namespace ember::ops_test
