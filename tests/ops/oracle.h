// Hand-written references for the rows whose float64 CPU run would be the kernel under test itself
// (OpRow::oracle): reading a tensor's elements by walking its strides over the raw bytes, and the
// dtype conversions written out from their definitions (core/copy.h: truncation toward zero with
// saturation and NaN to 0 for float to int, != 0 for bool, wrapping for narrower ints, float16 and
// bfloat16 by way of float, rounded to nearest even), so that no copy, cast or fill kernel is used.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember::ops_test {

// The raw bits of each element of t (a CPU tensor, any strides, broadcast included) in row-major
// order of its shape, read byte by byte through its strides.
std::vector<uint64_t> element_bits(const Tensor& t);
// Bits of elements of dtype dt as raw_bits (op_table.h) lays them out: one int64 per 32-bit word.
Tensor words_of(const std::vector<uint64_t>& bits, DType dt);

// An element's value from its bits: floats exactly as double; integers and bool as int64.
double value_of(uint64_t bits, DType dt);
int64_t int_of(uint64_t bits, DType dt);
// The value v converted to dt as the library defines it (above), as a double (exact: every value of
// every dtype but large int64 is a double), and its bits.
double converted(double v, DType dt);
uint64_t bits_of(double v, DType dt);
// v converted to an integer dtype (or bool), as int64 (exact where a double is not: int64's bounds).
int64_t converted_int(double v, DType dt);
// t's elements' values (value_of of element_bits), and as int64 for the integer dtypes.
std::vector<double> element_values(const Tensor& t);
std::vector<int64_t> element_ints(const Tensor& t);

}  // namespace ember::ops_test
