// Shapes and strides as plain vectors, and the arithmetic on them that every layer repeats: the
// element count, row-major strides, negative-dim wrapping with a message that names the op.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

Shape contiguous_strides(const Shape& shape);
int64_t numel_of(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); an ember::Error names `op` otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

std::string shape_str(const Shape& s);  // "[2, 3]"
std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace ember
