// cp.async wrappers for kernel files (the project's kernel rule 7): on sm_80+ a 16-byte copy from
// global to shared memory that bypasses the registers and completes asynchronously, so that the
// loads of the next tile overlap the arithmetic on the current one; elsewhere (the emulator, older
// GPUs) a plain synchronous copy with the same result, which the emulator runs and tests.
//
//   cp_async_16(dst, src, n);  // copies n of 16 bytes (0 <= n <= 16) and zero-fills the rest; with
//                              // n == 0 nothing is read (src need only be a valid pointer)
//   cp_async_commit();         // closes the group of copies issued so far
//   cp_async_wait_all();       // waits for every committed group; a __syncthreads() must follow
//                              // before other threads read what was copied
// dst and src must be 16-byte aligned, and n a multiple of 4 (whole floats).
#pragma once

#include <cstdint>

#include "core/cuda/device_api.h"

namespace ember::cuda {

EMBER_DEVICE void cp_async_16(void* dst, const void* src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
#else
  if (bytes == 16) {
    *static_cast<float4*>(dst) = *static_cast<const float4*>(src);  // one 16-byte load, as on a GPU
  } else {  // an edge: the words past `bytes` are zero, and never read
    const float* s = static_cast<const float*>(src);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (bytes > 0) v.x = s[0];
    if (bytes > 4) v.y = s[1];
    if (bytes > 8) v.z = s[2];
    if (bytes > 12) v.w = s[3];
    *static_cast<float4*>(dst) = v;
  }
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
