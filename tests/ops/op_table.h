// The op table: every op family's rows, run by tests/ops on every backend the build has (the CPU at
// each capability level, the emulated CUDA device in three thread orders, a real GPU's native and
// vendor kernels) against the float64 CPU reference, forward and backward, and checked by finite
// differences in float64. A new op is one row (op_rows_*.cpp); which kernel stubs the rows reach
// is measured, not listed (coverage_test.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace ember::ops_test {

using Inputs = std::vector<Tensor>;

// How close a backend's result must be to the reference, element by element:
// |got - want| <= atol + rtol * |want|. An element is held to its own magnitude (rtol) plus a
// floor (atol) for the elements whose exact value is near zero, where an op's rounding follows its
// inputs' magnitude rather than the result's (x - y, sin near pi, a normalised value near the
// mean); never to the tensor's largest element, which let a small element be wrong.
struct Tolerance {
  double rtol = 0.0, atol = 0.0;
};
// The defaults by the result's dtype (run_row.cpp says why each): the floating dtypes a few units
// of rounding of their own precision, integers and bool exact.
Tolerance default_tolerance(DType dt);
inline constexpr double kByDtype = -1.0;  // a tolerance field the row leaves to its result's dtype
// The absolute part for a result element that sums k products (a GEMM's, a convolution's with
// k = channels x kernel height x kernel width): its rounding follows the sum of the products'
// magnitudes, not the element, which can cancel to near zero. k rounding steps that do not all go
// one way leave about sqrt(k) units of rounding of the largest product, bounded by `largest` (25
// for two standard normal operands: their draws here stay under 5); twice that.
double accumulation_atol(DType dt, int64_t k, double largest = 25.0);

struct OpRow {
  std::string name;                          // unique, [a-z0-9_]
  std::function<Inputs(Generator&)> inputs;  // CPU tensors; floating ones get gradients
  std::function<Tensor(const Inputs&)> f;    // the op, its attributes bound
  double tol = kByDtype;                     // rtol (above); 0 with atol left to the dtype: exact
  bool grad = true;                          // compare input gradients (when the output has one)
  bool gradcheck = true;                     // finite differences in float64 on the CPU
  bool strided = true;                       // also run with every input of dim >= 2 non-contiguous
  std::vector<size_t> constants = {};        // inputs that get no gradient (running stats, weights)
  // The reference for a row that the float64 CPU run cannot check because it would run the very
  // kernel under test (bit patterns, integer and random kernels, dtype-specific stubs): computed
  // by hand from the row's inputs (on the CPU, in their own dtypes) without the kernels the row
  // tests. Such rows compare values only (grad false).
  std::function<Tensor(const Inputs&)> oracle = {};
  double atol = kByDtype;  // atol (above); a row that sets it says why beside it
  // For kernel rows in their own dtypes that have no oracle yet: checked against the other
  // implementation instead of the float64 run, the CPU levels against the emulated device's
  // kernels (forward thread order) and the emulated and GPU backends against the CPU, so that no
  // backend is compared with itself. Values only (grad false).
  bool cross_reference = false;
};

// All rows, in family order; names are unique (a test checks).
const std::vector<OpRow>& op_table();

// Row builders shared by the family files.
Tensor rn(Generator& g, Shape s);   // standard normal
Tensor pos(Generator& g, Shape s);  // |normal| + 0.5, for log, sqrt, div
Tensor ints(Generator& g, int64_t lo, int64_t hi, Shape s, DType dt = DType::Int64);
// t's elements as their raw bits, on the CPU: one int64 per 32-bit word (exact in the table's double
// comparison), so NaN payloads and signs and -0 must match too.
Tensor raw_bits(const Tensor& t);
// f run on float32 operands under autocast(their device, low: bfloat16 or float16), held to the
// float64 run within the rounding of sums of k products of 16-bit operands (op_rows_autocast.cpp);
// named "autocast_bf16_" or "autocast_f16_" + op.
OpRow autocast_row(DType low, const std::string& op, int64_t k, std::function<Inputs(Generator&)> inputs,
                   std::function<Tensor(const Inputs&)> f);

// One family file each appends its rows.
void add_elementwise_rows(std::vector<OpRow>& t);
void add_reduce_rows(std::vector<OpRow>& t);
void add_nn_rows(std::vector<OpRow>& t);
void add_index_rows(std::vector<OpRow>& t);
void add_optim_rows(std::vector<OpRow>& t);
void add_dtype_rows(std::vector<OpRow>& t);      // op_rows_dtypes.cpp
void add_size_rows(std::vector<OpRow>& t);       // op_rows_sizes.cpp
void add_reduction_rows(std::vector<OpRow>& t);  // op_rows_reductions.cpp
void add_sorting_rows(std::vector<OpRow>& t);    // op_rows_sorting.cpp
void add_pooling_rows(std::vector<OpRow>& t);    // op_rows_pooling.cpp
void add_conv_rows(std::vector<OpRow>& t);       // op_rows_conv.cpp
void add_conv_pool_rows(std::vector<OpRow>& t);  // op_rows_conv_pool.cpp
void add_linalg_rows(std::vector<OpRow>& t);     // op_rows_linalg.cpp
void add_norm_rows(std::vector<OpRow>& t);       // op_rows_norm.cpp
void add_loss_rows(std::vector<OpRow>& t);       // op_rows_loss.cpp
void add_rnn_rows(std::vector<OpRow>& t);        // op_rows_rnn.cpp

void add_gather_scatter_rows(std::vector<OpRow>& t);  // op_rows_gather_scatter.cpp
void add_reduce_grad_rows(std::vector<OpRow>& t);     // op_rows_reduce_grad.cpp
void add_compare_rows(std::vector<OpRow>& t);         // op_rows_compare.cpp
void add_copy_rows(std::vector<OpRow>& t);            // op_rows_copy.cpp

void add_gemm_rows(std::vector<OpRow>& t);        // op_rows_gemm.cpp
void add_conv_tile_rows(std::vector<OpRow>& t);   // op_rows_conv_tiles.cpp
void add_batch_norm_rows(std::vector<OpRow>& t);  // op_rows_batch_norm.cpp
void add_rnn_cell_rows(std::vector<OpRow>& t);    // op_rows_rnn_cells.cpp
void add_autocast_rows(std::vector<OpRow>& t);    // op_rows_autocast.cpp

}  // namespace ember::ops_test
