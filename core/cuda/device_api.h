// The device header every kernel file (core/cuda/*.cu) includes instead of <cuda_runtime.h>.
// Under nvcc it is the CUDA runtime; under the host compiler it is Ember's kernel emulator
// (core/cuda/emu/emu.h), so that one kernel source is compiled for the GPU and, for CI, run on
// the CPU against the CPU reference (docs/KERNELS-EMULATION.md). It also holds the few things both
// builds spell differently: shared-memory declarations and kernel registration.
//
//   EMBER_SHARED(float, tile, [32][33]);   // __shared__ float tile[32][33];
//   EMBER_DYNAMIC_SHARED(float, buf);      // the launch's dynamic shared memory, as float*
//   EMBER_REGISTER_CUDA_KERNEL(binary_stub, cuda_binary);
//   EMBER_REGISTER_CUDA_NATIVE(gemm_stub, Gemm, cuda_gemm, /*deterministic=*/true);  // families
//                                          // with a vendor side: core/cuda/native_kernels.h
//   EMBER_UNROLL for (...)                 // #pragma unroll
//   EMBER_DEVICE T f(T x)                  // a device function (inline host function when emulated)
#pragma once

#include "core/cuda/native_kernels.h"
#include "core/dispatch.h"

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#define EMBER_SHARED(type, name, dims) __shared__ type name dims
#define EMBER_DYNAMIC_SHARED(type, name)                               \
  extern __shared__ __align__(16) unsigned char ember_dynamic_smem_[]; \
  type* name = reinterpret_cast<type*>(ember_dynamic_smem_)
#define EMBER_DEVICE __device__ __forceinline__
#define EMBER_HOST_DEVICE __host__ __device__ __forceinline__
#define EMBER_UNROLL _Pragma("unroll")
// Fills the stub's CUDA slot: ops on CUDA tensors reach the kernel through the dispatch table.
#define EMBER_REGISTER_CUDA_KERNEL(stub, fn) EMBER_REGISTER_KERNEL(stub, CUDA, fn)
// Op families that also have a cuBLAS/cuDNN implementation: the stub's CUDA slot holds the
// native/vendor chooser, and the native kernel registers with it.
#define EMBER_REGISTER_CUDA_NATIVE(stub, family, fn, deterministic) \
  EMBER_REGISTER_NATIVE_CUDA_KERNEL(stub, family, fn, deterministic)

#else
#include "core/cuda/emu/emu.h"

// In emulation there is no vendor side: native kernels go to the emulator's registry like any other.
#define EMBER_REGISTER_CUDA_NATIVE(stub, family, fn, deterministic) EMBER_REGISTER_CUDA_KERNEL(stub, fn)

#define EMBER_DEVICE inline
#define EMBER_HOST_DEVICE inline
#define EMBER_UNROLL _Pragma("GCC unroll 16")
// Fills the emulator's registry (never the stub: a CUDA build's tests hold both the real and the
// emulated kernels in one process); tests reach it through ember::emu::kernel(stub).
#define EMBER_REGISTER_CUDA_KERNEL(stub, fn)                                       \
  [[maybe_unused]] static const bool stub##_registered_emu = [] {                  \
    ::ember::emu::register_kernel(&(stub), reinterpret_cast<void*>(&(fn)), #stub); \
    return true;                                                                   \
  }()
#endif
