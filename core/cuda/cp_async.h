// cp.async wrappers for kernel files (the project's kernel rule 7): on sm_80+ a 16-byte copy from
// global to shared memory that bypasses the registers and completes asynchronously, so that the
// loads of the next tile overlap the arithmetic on the current one; elsewhere (the emulator, older
// GPUs) a plain synchronous copy with the same result, which the emulator runs and tests.
//
//   cp_async_16(dst, src, n);  // copies n of 16 bytes (0 <= n <= 16) and zero-fills the rest; with
//                              // n == 0 nothing is read (src need only be a valid pointer)
//   cp_async_4(dst, src, n);   // one float: n is 4 (copied) or 0 (dst zeroed): the gathers of an
//                              // implicit GEMM, whose elements are not contiguous
//   cp_async_commit();         // closes the group of copies issued so far
//   cp_async_wait_all();       // waits for every committed group; a __syncthreads() must follow
//                              // before other threads read what was copied
// dst and src must be 16-byte aligned (4 for cp_async_4), and n a multiple of 2 (whole 16-bit
// elements; floats are whole when it is a multiple of 4).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/cuda/device_api.h"
#if !defined(__CUDACC__)
#include "core/cuda/emu/profile.h"
#endif

namespace ember::cuda {

EMBER_DEVICE void cp_async_16(void* dst, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#else
  if (bytes == 16) {
    *static_cast<float4*>(dst) = *static_cast<const float4*>(src);  // one 16-byte load, as on a GPU
  } else if (bytes % 4 == 0) {  // an edge: the words past `bytes` are zero, and never read
    const float* s = static_cast<const float*>(src);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (bytes > 0) v.x = s[0];
    if (bytes > 4) v.y = s[1];
    if (bytes > 8) v.z = s[2];
    if (bytes > 12) v.w = s[3];
    *static_cast<float4*>(dst) = v;
  } else {  // an edge of 16-bit elements (bfloat16): an odd count of them
    const uint16_t* s = static_cast<const uint16_t*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int i = 0; i < 8; ++i) d[i] = 2 * i < bytes ? s[i] : uint16_t{0};
  }
#endif
}

EMBER_DEVICE void cp_async_4(float* dst, const float* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#else
  // Every lane reads and a zero-filled one masks the bits afterwards: a branch round the read would
  // let the compiler skip it, and the emulator would see a warp's edge lanes leave the request.
  float f = *src;  // one 4-byte load and one store, as the hooks of the profiled build see them
  uint32_t v;
  memcpy(&v, &f, sizeof v);
  v &= 0u - static_cast<uint32_t>(bytes != 0);
  memcpy(&f, &v, sizeof v);
  *dst = f;
#if !defined(__CUDACC__)
  emu::profile::end_vector_access();
#endif
#endif
}

EMBER_DEVICE void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

EMBER_DEVICE void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace ember::cuda
