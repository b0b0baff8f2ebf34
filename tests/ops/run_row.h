// Running one row of the op table on one backend, and the float64 CPU reference it is compared
// with.
#pragma once

#include <functional>
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
// the row's oracle on its inputs where it has one; the upstream gradient is a fixed random tensor
// of the output's shape.
const RowResult& reference(const OpRow& row);
// A cross_reference row's reference for a backend of `group`: the row in its own dtypes on the
// emulated device for the cpu group (enter and leave make the emulator current around the run),
// on the CPU at the current level otherwise.
const RowResult& cross_reference(const OpRow& row, const std::string& group, Device emulated,
                                 const std::function<void()>& enter, const std::function<void()>& leave);
// The row run on `device` (inputs copied there, each of dim >= 2 as a non-contiguous view when
// `strided`), forward and, when the row has gradients, backward with the reference's upstream.
RowResult run_on(const OpRow& row, Device device, bool strided);

// Empty when `got` matches `want` element by element: the same shape, NaN where NaN, the same
// infinities, and every finite element within |got - want| <= tol.atol + tol.rtol * |want| (integer
// and bool results compared as int64, exactly unless tol says otherwise); otherwise the worst
// element, by how far past its bound it is.
std::string mismatch(const Tensor& got, const Tensor& want, Tolerance tol);

// The bound a row's result (or one of its gradients) in dtype `dt` is held to: the row's own
// rtol/atol where it set them, else the dtype's defaults.
Tolerance tolerance_for(const OpRow& row, DType dt);

// The comparison's own tests on crafted tensors (comparison_test.cpp; --group=harness).
void register_comparison_tests();

}  // namespace ember::ops_test
