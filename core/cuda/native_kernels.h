// Where Ember's own CUDA kernels register for the op families that also have a vendor
// implementation (GEMM, convolution, pooling, batch norm, RNN; see core/kernel_choice.h). For
// those families the stub's CUDA entry is the chooser (core/cuda/gemm_cublas.cpp,
// conv_cudnn.cpp, ...), which runs the native kernel registered here or the vendor one, so a
// native kernel file names the family as the registration's fourth argument:
//     EMBER_REGISTER_KERNEL(gemm_stub, CUDA, native_gemm, Gemm);
// Ops without a vendor implementation register into their stub directly (three arguments).
// Every native kernel registered this way is deterministic (no float atomics across a batch); one
// that is not would call register_native_kernel(..., false) itself. Plain C++ (no CUDA headers),
// so the kernel emulation build can include it too.
#pragma once

#include "core/dispatch.h"
#include "core/kernel_choice.h"

namespace ember::cuda {

template <typename Fn>
struct NativeKernel {
  Fn* fn = nullptr;
  bool deterministic = true;  // false when it uses float atomics across a batch
};

// The native kernel registered for `stub` (fn null when none is).
template <typename Fn>
NativeKernel<Fn> native_kernel(const DispatchStub<Fn>& stub, KernelFamily f) {
  const NativeEntry& e = native_entry(&stub, f);
  return {reinterpret_cast<Fn*>(e.fn), e.deterministic};
}

template <typename Fn>
void register_native_kernel(const DispatchStub<Fn>& stub, KernelFamily f, Fn* fn, bool deterministic) {
  NativeEntry& e = native_entry(&stub, f);
  e.fn = reinterpret_cast<void*>(fn);
  e.deterministic = deterministic;
}

}  // namespace ember::cuda

// EMBER_REGISTER_KERNEL(stub, CUDA, fn, Family) (core/dispatch.h) expands to this.
#define EMBER_REGISTER_KERNEL_CUDA_NATIVE(stub, fn, family)                                                   \
  [[maybe_unused]] static const bool stub##_native_cuda_registered = [] {                                     \
    ::ember::cuda::register_native_kernel(stub, ::ember::KernelFamily::family, (fn), /*deterministic=*/true); \
    return true;                                                                                              \
  }()
