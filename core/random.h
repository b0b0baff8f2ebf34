// Kernels that fill tensors from a Philox stream, with the element-to-counter layout documented
// in core/generator.h; the CUDA backend registers kernels that follow the same layout.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

enum class RandomKind { Uniform, Normal, Bernoulli, RandInt };

struct RandomParams {
  RandomKind kind = RandomKind::Uniform;
  double a = 0.0;  // uniform low / normal mean / bernoulli p (when no p tensor) / randint low
  double b = 1.0;  // uniform high / normal std / randint high
  uint64_t seed = 0;
  uint64_t offset = 0;  // first Philox block
};

// Number of Philox blocks an op of this kind over n elements consumes.
inline uint64_t random_blocks(RandomKind kind, int64_t n) {
  const uint64_t un = static_cast<uint64_t>(n);
  return kind == RandomKind::Normal ? un : (un + 1) / 2;
}

// dst contiguous; p (bernoulli only, optional) has dst's shape.
using RandomFn = void(const Tensor& dst, const RandomParams& params, const Tensor& p);
EMBER_DECLARE_STUB(random_stub, RandomFn);

}  // namespace ember
