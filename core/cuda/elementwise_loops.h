// The launch machinery of Ember's elementwise CUDA kernels: out[i] = f(in0[i], in1[i], ...) over
// tensors of one shape (operands already broadcast: expanded dims have stride 0). Contiguous
// operands of one element size take a grid-stride loop with 16-byte vector loads and stores;
// anything else goes through an offset calculator over the coalesced dims. No __restrict__: out may
// alias an input (the in-place ops). The functor carries
// the op, so one kernel per dtype serves a whole op family (compile time matters: every kernel is
// built for two architectures and for the emulator). Include only from kernel files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/tensor.h"

namespace ember::cuda {

inline constexpr int kMapDims = 10;
inline constexpr int kMapThreads = 256;
inline constexpr int64_t kMapMaxBlocks = 8192;  // grid-stride loops cover the rest

// Sizes and per-operand strides (elements) of the coalesced iteration space; operand 0 is out.
template <int N>
struct OffsetCalc {
  int ndim = 0;
  int64_t sizes[kMapDims];
  int64_t strides[N][kMapDims];

  EMBER_DEVICE void get(int64_t i, int64_t* off) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t idx = i % sizes[d];
      i /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
    }
  }
};

// Drops size-1 dims and merges neighbours that are contiguous with each other in every operand.
template <int N>
OffsetCalc<N> make_offset_calc(const Tensor* const* ts) {
  OffsetCalc<N> oc;
  const Tensor& out = *ts[0];
  for (int64_t d = 0; d < out.dim(); ++d) {
    const int64_t size = out.size(d);
    if (size == 1) continue;
    bool merge = oc.ndim > 0;
    for (int k = 0; k < N && merge; ++k) merge = oc.strides[k][oc.ndim - 1] == ts[k]->stride(d) * size;
    if (merge) {
      oc.sizes[oc.ndim - 1] *= size;
      for (int k = 0; k < N; ++k) oc.strides[k][oc.ndim - 1] = ts[k]->stride(d);
      continue;
    }
    EMBER_CHECK(oc.ndim < kMapDims, "CUDA elementwise kernels support at most ", kMapDims,
                " non-mergeable dims, got a tensor of shape ", shape_str(out.shape()));
    oc.sizes[oc.ndim] = size;
    for (int k = 0; k < N; ++k) oc.strides[k][oc.ndim] = ts[k]->stride(d);
    ++oc.ndim;
  }
  return oc;
}

template <typename T, int W>
struct alignas(sizeof(T) * W) Vec {
  T v[W];
};

template <typename F, typename Out, typename... In>
__global__ void map_contiguous(F f, int64_t n, Out* out, const In*... in) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) out[i] = f(in[i]...);
}

// W elements per thread and step through Vec loads; the n % W tail is done element by element.
template <int W, typename F, typename Out, typename... In>
__global__ void map_vectorized(F f, int64_t n, Out* out, const In*... in) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / W;
  for (int64_t i = first; i < nvec; i += step) {
    Vec<Out, W> o;
    EMBER_UNROLL
    for (int k = 0; k < W; ++k) o.v[k] = f(reinterpret_cast<const Vec<In, W>*>(in)[i].v[k]...);
    reinterpret_cast<Vec<Out, W>*>(out)[i] = o;
  }
  for (int64_t i = nvec * W + first; i < n; i += step) out[i] = f(in[i]...);
}

template <int N, typename F, typename Out, typename... In, size_t... I>
EMBER_DEVICE void map_one_strided(F& f, const int64_t* off, Out* out, std::index_sequence<I...>, const In*... in) {
  out[off[0]] = f(in[off[I + 1]]...);
}

template <int N, typename F, typename Out, typename... In>
__global__ void map_strided(F f, int64_t n, OffsetCalc<N> oc, Out* out, const In*... in) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N];
    oc.get(i, off);
    map_one_strided<N>(f, off, out, std::index_sequence_for<In...>{}, in...);
  }
}

inline unsigned map_blocks(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kMapThreads - 1) / kMapThreads, 1, kMapMaxBlocks));
}

// out = f(ins...) elementwise; Out and In... are the element types of out and ins.
template <typename Out, typename... In, typename F, typename... Ts>
void map(F f, const Tensor& out, const Ts&... ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one element type per input");
  const int64_t n = out.numel();
  if (n == 0) return;
  constexpr int N = 1 + sizeof...(In);
  Out* o = static_cast<Out*>(out.raw_data());
  const cudaStream_t stream = kernel_stream();
  const bool contiguous = out.is_contiguous() && (ins.is_contiguous() && ...);
  if (contiguous) {
    constexpr bool same_size = ((sizeof(In) == sizeof(Out)) && ...);
    constexpr int W = 16 / static_cast<int>(sizeof(Out));
    if constexpr (same_size && W > 1) {
      const bool aligned =
          reinterpret_cast<uintptr_t>(o) % 16 == 0 && ((reinterpret_cast<uintptr_t>(ins.raw_data()) % 16 == 0) && ...);
      if (aligned) {
        launch(map_vectorized<W, F, Out, In...>, map_blocks((n + W - 1) / W), kMapThreads, 0, stream, f, n, o,
               static_cast<const In*>(ins.raw_data())...);
        return;
      }
    }
    launch(map_contiguous<F, Out, In...>, map_blocks(n), kMapThreads, 0, stream, f, n, o,
           static_cast<const In*>(ins.raw_data())...);
    return;
  }
  const Tensor* ts[N] = {&out, &ins...};
  launch(map_strided<N, F, Out, In...>, map_blocks(n), kMapThreads, 0, stream, f, n, make_offset_calc<N>(ts), o,
         static_cast<const In*>(ins.raw_data())...);
}

}  // namespace ember::cuda
