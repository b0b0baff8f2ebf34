// Kernels behind Tensor::copy_ and fill_: copy with dtype conversion between tensors of the same
// shape (src may be a broadcast view), on any device pair the registered backends support.
#pragma once

#include "core/dispatch.h"
#include "core/float_to_int.h"
#include "core/tensor.h"

namespace ember {

using CopyFn = void(const Tensor& dst, const Tensor& src);
using FillFn = void(const Tensor& dst, double value);
EMBER_DECLARE_STUB(copy_stub, CopyFn);  // indexed by the device that does the work
EMBER_DECLARE_STUB(fill_stub, FillFn);

// Converts between element types: float -> int truncates toward zero and saturates, NaN -> 0
// (core/float_to_int.h); -> bool is != 0; int -> narrower int wraps; half and bfloat16 go through
// float.
template <typename To, typename From>
inline To cast_value(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return cast_value<To>(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_int<To>(v);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember
