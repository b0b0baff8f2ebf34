// Size2 and ConvPadding: the (height, width) pairs that convolution and pooling layers take, so
// that an option is written either as one number for both dims or as a pair, as in PyTorch:
// `nn::Conv2d c{3, 8, 3, {.stride = 2, .padding = "same"}}`, `{.kernel = {3, 5}}`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace ember::nn {

struct Size2 {
  int64_t h = 0, w = 0;
  Size2() = default;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT(google-explicit-constructor): `.stride = 2`
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  std::array<int64_t, 2> arr() const { return {h, w}; }
  bool operator==(const Size2&) const = default;
  std::string str() const {
    if (h == w) return std::to_string(h);
    // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on the chained operator+ form.
    std::string s = "(";
    s.append(std::to_string(h)).append(", ").append(std::to_string(w)).append(")");
    return s;
  }
};

// A number, a pair, or "same" / "valid" (PyTorch's string paddings).
struct ConvPadding {
  Size2 size{0};
  bool same = false;
  ConvPadding() = default;
  ConvPadding(int64_t both) : size(both) {}  // NOLINT(google-explicit-constructor)
  ConvPadding(int64_t h, int64_t w) : size(h, w) {}
  ConvPadding(Size2 s) : size(s) {}  // NOLINT(google-explicit-constructor)
  // A string literal only (so that a literal 0 is the number, not a null pointer).
  template <size_t N>
  ConvPadding(const char (&mode)[N]) {  // NOLINT(google-explicit-constructor)
    const std::string m = mode;
    EMBER_CHECK(m == "same" || m == "valid", "Conv2d: padding '", m, "' is not one of 'same', 'valid' or a number");
    same = m == "same";
  }
  std::string str() const { return same ? "same" : size.str(); }
};

}  // namespace ember::nn
