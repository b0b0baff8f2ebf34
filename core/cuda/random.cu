// CUDA random fills (core/random.h) and dropout's mask application (core/nn_kernels.h). The
// fills follow core/generator.h's counter layout element by element (element i of a uniform or
// bernoulli fill uses Philox block offset + i/2, words 2*(i%2) and 2*(i%2)+1; normal uses block
// offset + i), with the CPU kernel's arithmetic, so the same seed and offset give the same
// numbers on both devices: bit for bit for bernoulli masks and integers, to an ulp for the
// transcendental ones (normal's log/cos).
#include <cstdint>
#include <type_traits>

#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/half.h"
#include "core/cuda/launch.h"
#include "core/nn_kernels.h"
#include "core/philox.h"
#include "core/random.h"

namespace ember::cuda {
namespace {

template <typename Acc>
EMBER_DEVICE Acc uniform_at(uint64_t seed, uint64_t offset, int64_t i) {
  const Philox4x32 r = philox_block(seed, offset + static_cast<uint64_t>(i) / 2);
  const int w = 2 * static_cast<int>(i % 2);
  if constexpr (std::is_same_v<Acc, double>)
    return uints_to_unit_double(r.v[w], r.v[w + 1]);
  else
    return uint_to_unit_float(r.v[w]);
}

template <typename Acc>
EMBER_DEVICE Acc normal_at(uint64_t seed, uint64_t offset, int64_t i) {
  const Philox4x32 r = philox_block(seed, offset + static_cast<uint64_t>(i));
  if constexpr (std::is_same_v<Acc, double>) {
    const double u1 = uints_to_unit_double(r.v[0], r.v[1]);
    const double u2 = uints_to_unit_double(r.v[2], r.v[3]);
    return d_sqrt(-2.0 * d_log(1.0 - u1)) * d_cos(2.0 * 3.14159265358979323846 * u2);
  } else {
    const float u1 = uint_to_unit_float(r.v[0]);
    const float u2 = uint_to_unit_float(r.v[1]);
    return d_sqrt(-2.0f * d_log(1.0f - u1)) * d_cos(6.2831853071795864f * u2);
  }
}

template <typename Out, typename Acc>
__global__ void random_fill(Out* out, int64_t n, RandomKind kind, double a, double b, uint64_t seed, uint64_t offset,
                            const double* prob) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    switch (kind) {
      case RandomKind::Uniform: {
        const Acc lo = static_cast<Acc>(a), span = static_cast<Acc>(b - a);
        out[i] = cast_element<Out>(lo + span * uniform_at<Acc>(seed, offset, i));
        break;
      }
      case RandomKind::Normal: {
        const Acc mean = static_cast<Acc>(a), sd = static_cast<Acc>(b);
        out[i] = cast_element<Out>(mean + sd * normal_at<Acc>(seed, offset, i));
        break;
      }
      case RandomKind::Bernoulli: {
        const double p = prob ? prob[i] : a;
        out[i] = cast_element<Out>(static_cast<double>(uniform_at<Acc>(seed, offset, i)) < p ? 1.0 : 0.0);
        break;
      }
      case RandomKind::RandInt: {
        const Philox4x32 r = philox_block(seed, offset + static_cast<uint64_t>(i) / 2);
        const int w = 2 * static_cast<int>(i % 2);
        const uint64_t x = (static_cast<uint64_t>(r.v[w]) << 32) | r.v[w + 1];
        const uint64_t range = static_cast<uint64_t>(b - a);
        out[i] = cast_element<Out>(static_cast<int64_t>(a) + static_cast<int64_t>(x % range));
        break;
      }
    }
  }
}

void cuda_random(const Tensor& dst, const RandomParams& p, const Tensor& prob) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(dst.device());
  EMBER_DISPATCH_ALL(dst.dtype(), "random", [&] {
    using Out = kernel_t<scalar_t>;
    // Math in double for float64 outputs and float otherwise, as on the CPU.
    using Acc = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    launch(random_fill<Out, Acc>, map_blocks(n), kMapThreads, 0, kernel_stream(), static_cast<Out*>(dst.raw_data()), n,
           p.kind, p.a, p.b, p.seed, p.offset, prob.defined() ? static_cast<const double*>(prob.raw_data()) : nullptr);
  });
}

// y = x * (mask * scale): a multiplication, so a dropped NaN stays NaN (as on the CPU).
template <typename T>
struct DropoutF {
  T scale;
  EMBER_DEVICE T operator()(T x, uint8_t m) const { return x * (static_cast<T>(m) * scale); }
};

void cuda_dropout_apply(const Tensor& out, const Tensor& input, const Tensor& mask, double scale) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(input.dtype(), "dropout", [&] {
    map<scalar_t, scalar_t, uint8_t>(DropoutF<scalar_t>{static_cast<scalar_t>(scale)}, out, input, mask);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(random_stub, CUDA, cuda_random);
EMBER_REGISTER_KERNEL(dropout_apply_stub, CUDA, cuda_dropout_apply);

}  // namespace ember::cuda
