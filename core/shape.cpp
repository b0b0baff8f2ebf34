#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace ember {

// A shape whose sizes multiply past what int64 holds cannot be a tensor (and overflowing the
// product would be undefined behaviour): an error, wherever the shape came from.
int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    EMBER_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", shape_str(shape),
                " has more elements than a 64-bit count holds");
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    EMBER_CHECK(!__builtin_mul_overflow(acc, std::max<int64_t>(shape[d], 1), &acc), "shape ", shape_str(shape),
                " has strides larger than a 64-bit offset holds");
  }
  return st;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 / -1
  EMBER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim, " dims (expected ", -n,
              " <= dim < ", n, ")");
  return dim < 0 ? dim + n : dim;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << shape_str(s);
}

}  // namespace ember
