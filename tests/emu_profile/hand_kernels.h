// Hand-written kernels whose efficiency counters are known by hand (tests/emu_profile), compiled
// with the access hooks like the profiled kernel files. Pointers are device memory the caller
// tracks (emu::profile::track) or takes from the device `emu`.
#pragma once

namespace hand {

// out[i] = in[i], one float per thread: a warp reads 128 contiguous bytes (4 sectors).
void copy(const float* in, float* out, int n);
// out[i] = in[i * stride]: with stride 32 each lane reads its own sector.
void strided_read(const float* in, float* out, int n, int stride);
// One float4 per thread: a warp reads 512 contiguous bytes (16 sectors) in one request.
void copy_vec4(const float* in, float* out, int n);
// A 32 x 32 transpose through shared memory, one block of 32 x 32 threads: rows are written,
// columns read. Unpadded, each column read hits one bank 32 times; padded to 33, none twice.
void transpose_tile(const float* in, float* out, bool padded);
// Lanes below 16 store, the others do not: a divergent branch, half-empty store requests.
void half_warp_store(const float* in, float* out, int n);
// Planted for the budget test: a GEMM with one thread per output whose lanes walk rows of A
// (consecutive lanes 4 * k bytes apart) and columns of C: uncoalesced.
void naive_gemm_uncoalesced(const float* a, const float* b, float* c, int m, int n, int k);

}  // namespace hand
