// Typed pointers to a tensor's first element for the host side of kernels, CPU or CUDA, which
// take optional operands (a missing bias, running statistics, gradients nobody asked for) as
// undefined tensors: an undefined tensor gives nullptr instead of an error, and the kernel
// tests the pointer.
#pragma once

#include "core/tensor.h"

namespace ember {

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

template <typename T>
T* mptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

}  // namespace ember
