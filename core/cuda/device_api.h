// The device header every kernel file (core/cuda/*.cu) includes instead of <cuda_runtime.h>.
// Under nvcc it is the CUDA runtime; under the host compiler it is Ember's kernel emulator
// (core/cuda/emu/emu.h), so that one kernel source is compiled for the GPU and, for CI, run on
// the CPU against the CPU reference (docs/cuda/emulation.md). It also holds the few things both
// builds spell differently: shared-memory declarations and kernel registration.
//
//   EMBER_SHARED(float, tile, [32][33]);   // __shared__ float tile[32][33];
//   EMBER_DYNAMIC_SHARED(float, buf);      // the launch's dynamic shared memory, as float*
//   EMBER_REGISTER_KERNEL(binary_stub, CUDA, cuda_binary);    // core/dispatch.h
//   EMBER_REGISTER_KERNEL(gemm_stub, CUDA, cuda_gemm, Gemm);  // families with a vendor side:
//                                          // core/cuda/native_kernels.h
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

#else
#include "core/cuda/emu/emu.h"

#define EMBER_DEVICE inline
#define EMBER_HOST_DEVICE inline
#define EMBER_UNROLL _Pragma("GCC unroll 16")
// The same registrations fill the stub's Emulated slot instead of its CUDA slot (a CUDA build's
// tests hold both the real and the emulated kernels in one process), and native kernels of
// families with a vendor side go there too: the emulator has no vendor side. Tests run them as
// the device `emu` (ops and autograd end to end), or call one directly with emu::kernel(stub).
#undef EMBER_REGISTER_KERNEL_CUDA
#define EMBER_REGISTER_KERNEL_CUDA(stub, fn) EMBER_REGISTER_IN_SLOT_(stub, Emulated, fn)
#undef EMBER_REGISTER_KERNEL_CUDA_NATIVE
#define EMBER_REGISTER_KERNEL_CUDA_NATIVE(stub, fn, family) EMBER_REGISTER_IN_SLOT_(stub, Emulated, fn)
#endif
