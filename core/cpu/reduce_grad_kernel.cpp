// CPU helpers for reduction backwards: the elementwise masks and scalings of amax/norm/var/
// logsumexp gradients (over broadcast views, through the shared elementwise loops), the scatter
// of max/min-along-a-dim gradients to their indices, and prod's exclusive products.
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/loops.h"
#include "core/parallel.h"
#include "core/reduce_kernels.h"

namespace ember {

namespace {

template <typename T>
T sign_of(T x) {
  return static_cast<T>((x > 0) - (x < 0));
}

void cpu_reduce_grad(ReduceGradOp op, const Tensor& gi, const Tensor& x, const Tensor& a, const Tensor& b, double p) {
  EMBER_DISPATCH_FLOAT(x.dtype(), "reduction backward", [&] {
    using T = scalar_t;
    switch (op) {
      case ReduceGradOp::EqMask:
        cpu::map2<T, T, T>(gi, x, a, [](T v, T m) { return static_cast<T>(v == m); });
        break;
      case ReduceGradOp::AbsEqMask:
        cpu::map2<T, T, T>(gi, x, a, [](T v, T m) { return static_cast<T>(std::abs(v) == m); });
        break;
      case ReduceGradOp::EqScale:
        cpu::map3<T, T, T, T>(gi, x, a, b, [](T v, T m, T g) { return v == m ? g : T(0); });
        break;
      case ReduceGradOp::AbsEqSignScale:
        cpu::map3<T, T, T, T>(gi, x, a, b, [](T v, T m, T g) { return std::abs(v) == m ? sign_of(v) * g : T(0); });
        break;
      case ReduceGradOp::CenteredScale:
        cpu::map3<T, T, T, T>(gi, x, a, b, [](T v, T m, T g) { return g * (v - m); });
        break;
      case ReduceGradOp::ExpScale:
        cpu::map3<T, T, T, T>(gi, x, a, b, [](T v, T m, T g) {
          return m == -std::numeric_limits<T>::infinity() ? T(0) : g * std::exp(v - m);
        });
        break;
      case ReduceGradOp::NormScale: {
        const T pm1 = static_cast<T>(p - 1.0);
        if (p == 1.0) {
          cpu::map3<T, T, T, T>(gi, x, a, b, [](T v, T, T g) { return g * sign_of(v); });
        } else if (p == 2.0) {
          cpu::map3<T, T, T, T>(gi, x, a, b, [](T v, T n, T g) { return n == 0 ? T(0) : g * v / n; });
        } else {
          cpu::map3<T, T, T, T>(gi, x, a, b, [pm1](T v, T n, T g) {
            return (n == 0 || v == 0) ? T(0) : g * sign_of(v) * std::pow(std::abs(v) / n, pm1);
          });
        }
        break;
      }
    }
  });
}

template <typename T>
void index_grad_impl(T* out, const T* gp, const int64_t* ip, int64_t A, int64_t R, int64_t C) {
  parallel_for(0, A, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R * C, 1)), [&](int64_t b, int64_t e) {
    for (int64_t a = b; a < e; ++a)
      for (int64_t r = 0; r < R; ++r) {
        T* o = out + (a * R + r) * C;
        const T* gr = gp + a * C;
        const int64_t* ir = ip + a * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) o[c] = ir[c] == r ? gr[c] : T(0);
      }
  });
}

void cpu_index_grad(const Tensor& gi, const Tensor& g, const Tensor& indices) {
  EMBER_DISPATCH_FLOAT(gi.dtype(), "max/min backward", [&] {
    using T = scalar_t;
    index_grad_impl<T>(gi.data_ptr<T>(), g.data_ptr<T>(), indices.data_ptr<int64_t>(), gi.size(0), gi.size(1),
                       gi.size(2));
  });
}

// Exclusive products by a prefix pass and a suffix pass, so zeros need no special case.
void cpu_prod_grad(const Tensor& gi, const Tensor& g, const Tensor& x) {
  const int64_t A = x.size(0), R = x.size(1), C = x.size(2);
  EMBER_DISPATCH_FLOAT(x.dtype(), "prod backward", [&] {
    using T = scalar_t;
    T* out = gi.data_ptr<T>();
    const T* gp = g.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    parallel_for(0, A, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R * C, 1)), [&](int64_t b, int64_t e) {
      std::vector<T> acc(static_cast<size_t>(C));
      for (int64_t a = b; a < e; ++a) {
        const T* xa = xp + a * R * C;
        T* oa = out + a * R * C;
        std::fill(acc.begin(), acc.end(), T(1));
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) {
            oa[r * C + c] = acc[c];
            acc[c] *= xa[r * C + c];
          }
        std::copy(gp + a * C, gp + (a + 1) * C, acc.begin());
        for (int64_t r = R - 1; r >= 0; --r)
          for (int64_t c = 0; c < C; ++c) {
            oa[r * C + c] *= acc[c];
            acc[c] *= xa[r * C + c];
          }
      }
    });
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(reduce_grad_stub, CPU, cpu_reduce_grad);
EMBER_REGISTER_KERNEL(index_grad_stub, CPU, cpu_index_grad);
EMBER_REGISTER_KERNEL(prod_grad_stub, CPU, cpu_prod_grad);

}  // namespace ember
