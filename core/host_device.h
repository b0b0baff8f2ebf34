// EMBER_HOST_DEVICE_FN marks a small function that both the CPU kernels and the CUDA kernels
// (nvcc, or the host compiler in kernel emulation) call, so that the two backends share one
// definition of a scalar rule instead of two copies that could drift apart.
#pragma once

#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE_FN __host__ __device__ __forceinline__
#else
#define EMBER_HOST_DEVICE_FN inline
#endif
