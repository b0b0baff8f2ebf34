// CPU kernels for the fused optimizer updates: one threaded pass per parameter, the branches on
// hyperparameters hoisted out of the loop as template flags so the inner loops vectorise.
#include "layers/optim/fused_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <type_traits>

#include "core/parallel.h"

namespace ember::optim {

namespace {

// Calls f with std::bool_constant values for each runtime flag.
template <typename F>
void with_flags(F&& f) {
  f();
}
template <typename F, typename... Bools>
void with_flags(F&& f, bool b, Bools... rest) {
  if (b)
    with_flags([&](auto... flags) { f(std::true_type{}, flags...); }, rest...);
  else
    with_flags([&](auto... flags) { f(std::false_type{}, flags...); }, rest...);
}

// The CPU's host reads a skip flag itself (Optimizer::step_unless): a step decided on the device
// reaching a CPU kernel is a caller's mistake, refused rather than half-honoured.
void refuse_device_step(const DeviceStep& d, const char* op) {
  EMBER_CHECK(!d.defined(), op, ": a step decided on the device (DeviceStep) is for device backends, not the CPU");
}

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

// Chunks of a parameter update: elementwise, so the grain is the usual elementwise one. The
// kernels' loops read local copies of their hyperparameters (v_ for v) and go through __restrict
// pointers: read through the enclosing lambdas' by-reference captures, the compiler must assume
// that a store to the parameter may change them, reloads them every element and keeps the loop
// scalar (SGD ran about 1.5x slower than libtorch's three-pass update).
template <typename F>
void for_range(int64_t n, const F& f) {
  parallel_for(0, n, kParallelGrain, f);
}

void cpu_sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdHyper& h) {
  refuse_device_step(h.device, "SGD.step");
  EMBER_DISPATCH_FLOAT(param.dtype(), "SGD.step", [&] {
    using T = scalar_t;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* b = ptr<T>(buf);
    const T lr = static_cast<T>(h.lr), wd = static_cast<T>(h.weight_decay), mom = static_cast<T>(h.momentum),
            damp1 = static_cast<T>(1.0 - h.dampening), sign = static_cast<T>(h.maximize ? -1 : 1);
    with_flags(
        [&](auto WD, auto HAS_BUF, auto INIT, auto NESTEROV) {
          for_range(param.numel(), [&](int64_t s, int64_t e) {
            const T lr_ = lr, wd_ = wd, mom_ = mom, damp1_ = damp1, sign_ = sign;
            T* __restrict const P = p;
            const T* __restrict const G = g;
            T* __restrict const B = b;
            for (int64_t i = s; i < e; ++i) {
              T d = sign_ * G[i];
              if constexpr (WD) d += wd_ * P[i];
              if constexpr (HAS_BUF) {
                T bi;
                if constexpr (INIT)
                  bi = d;
                else
                  bi = mom_ * B[i] + damp1_ * d;
                B[i] = bi;
                if constexpr (NESTEROV)
                  d = d + mom_ * bi;
                else
                  d = bi;
              }
              P[i] -= lr_ * d;
            }
          });
        },
        h.weight_decay != 0, b != nullptr, h.init_buffer, h.nesterov);
  });
}

void cpu_adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, const AdamHyper& h) {
  refuse_device_step(h.device, "Adam.step");
  EMBER_DISPATCH_FLOAT(param.dtype(), "Adam.step", [&] {
    using T = scalar_t;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* m = ptr<T>(exp_avg);
    T* v = ptr<T>(exp_avg_sq);
    T* vmax = ptr<T>(max_exp_avg_sq);
    const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2), omb1 = static_cast<T>(1.0 - h.beta1),
            omb2 = static_cast<T>(1.0 - h.beta2), eps = static_cast<T>(h.eps), wd = static_cast<T>(h.weight_decay),
            step_size = static_cast<T>(h.lr / h.bias_correction1),
            inv_bc2_sqrt = static_cast<T>(1.0 / std::sqrt(h.bias_correction2)),
            decay = static_cast<T>(1.0 - h.lr * h.weight_decay), sign = static_cast<T>(h.maximize ? -1 : 1);
    with_flags(
        [&](auto WD, auto DECOUPLED, auto AMS) {
          for_range(param.numel(), [&](int64_t s, int64_t e) {
            const T b1_ = b1, b2_ = b2, omb1_ = omb1, omb2_ = omb2, eps_ = eps, wd_ = wd, step_size_ = step_size,
                    inv_bc2_sqrt_ = inv_bc2_sqrt, decay_ = decay, sign_ = sign;
            T* __restrict const P = p;
            const T* __restrict const G = g;
            T* __restrict const M = m;
            T* __restrict const V = v;
            T* __restrict const VMAX = vmax;
            for (int64_t i = s; i < e; ++i) {
              T gi = sign_ * G[i];
              T pi = P[i];
              if constexpr (WD) {
                if constexpr (DECOUPLED)
                  pi *= decay_;
                else
                  gi += wd_ * pi;
              }
              const T mi = b1_ * M[i] + omb1_ * gi;
              const T vi = b2_ * V[i] + omb2_ * gi * gi;
              M[i] = mi;
              V[i] = vi;
              T denom_sq = vi;
              if constexpr (AMS) {
                denom_sq = std::max(VMAX[i], vi);
                VMAX[i] = denom_sq;
              }
              const T denom = std::sqrt(denom_sq) * inv_bc2_sqrt_ + eps_;
              P[i] = pi - step_size_ * mi / denom;
            }
          });
        },
        h.weight_decay != 0, h.decoupled_weight_decay, h.amsgrad);
  });
}

void cpu_rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& momentum_buf,
                      const Tensor& grad_avg, const RmspropHyper& h) {
  refuse_device_step(h.device, "RMSprop.step");
  EMBER_DISPATCH_FLOAT(param.dtype(), "RMSprop.step", [&] {
    using T = scalar_t;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* sq = ptr<T>(square_avg);
    T* buf = ptr<T>(momentum_buf);
    T* ga = ptr<T>(grad_avg);
    const T lr = static_cast<T>(h.lr), alpha = static_cast<T>(h.alpha), oma = static_cast<T>(1.0 - h.alpha),
            eps = static_cast<T>(h.eps), wd = static_cast<T>(h.weight_decay), mom = static_cast<T>(h.momentum),
            sign = static_cast<T>(h.maximize ? -1 : 1);
    with_flags(
        [&](auto WD, auto CENTERED, auto MOM) {
          for_range(param.numel(), [&](int64_t s, int64_t e) {
            const T lr_ = lr, alpha_ = alpha, oma_ = oma, eps_ = eps, wd_ = wd, mom_ = mom, sign_ = sign;
            T* __restrict const P = p;
            const T* __restrict const G = g;
            T* __restrict const SQ = sq;
            T* __restrict const BUF = buf;
            T* __restrict const GA = ga;
            for (int64_t i = s; i < e; ++i) {
              T gi = sign_ * G[i];
              if constexpr (WD) gi += wd_ * P[i];
              const T si = alpha_ * SQ[i] + oma_ * gi * gi;
              SQ[i] = si;
              T avg;
              if constexpr (CENTERED) {
                const T gai = alpha_ * GA[i] + oma_ * gi;
                GA[i] = gai;
                avg = std::sqrt(si - gai * gai) + eps_;
              } else {
                avg = std::sqrt(si) + eps_;
              }
              if constexpr (MOM) {
                const T bi = mom_ * BUF[i] + gi / avg;
                BUF[i] = bi;
                P[i] -= lr_ * bi;
              } else {
                P[i] -= lr_ * gi / avg;
              }
            }
          });
        },
        h.weight_decay != 0, h.centered, buf != nullptr);
  });
}

void cpu_adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& state_sum, const AdagradHyper& h) {
  refuse_device_step(h.device, "Adagrad.step");
  EMBER_DISPATCH_FLOAT(param.dtype(), "Adagrad.step", [&] {
    using T = scalar_t;
    T* p = ptr<T>(param);
    const T* g = ptr<T>(grad);
    T* sum = ptr<T>(state_sum);
    const T clr = static_cast<T>(h.clr), eps = static_cast<T>(h.eps), wd = static_cast<T>(h.weight_decay),
            sign = static_cast<T>(h.maximize ? -1 : 1);
    with_flags(
        [&](auto WD) {
          for_range(param.numel(), [&](int64_t s, int64_t e) {
            const T clr_ = clr, eps_ = eps, wd_ = wd, sign_ = sign;
            T* __restrict const P = p;
            const T* __restrict const G = g;
            T* __restrict const SUM = sum;
            for (int64_t i = s; i < e; ++i) {
              T gi = sign_ * G[i];
              if constexpr (WD) gi += wd_ * P[i];
              const T si = SUM[i] + gi * gi;
              SUM[i] = si;
              P[i] -= clr_ * gi / (std::sqrt(si) + eps_);
            }
          });
        },
        h.weight_decay != 0);
  });
}

double cpu_grad_norm(const Tensor& t, double p) {
  double result = 0;
  EMBER_DISPATCH_FLOAT(t.dtype(), "clip_grad_norm_", [&] {
    using T = scalar_t;
    const T* x = ptr<T>(t);
    std::mutex mu;
    const bool inf = std::isinf(p);
    for_range(t.numel(), [&](int64_t s, int64_t e) {
      double acc = 0;
      if (inf) {
        bool nan = false;
        for (int64_t i = s; i < e; ++i) {
          const double v = std::abs(static_cast<double>(x[i]));
          nan |= std::isnan(v);
          acc = std::max(acc, v);
        }
        if (nan) acc = std::numeric_limits<double>::quiet_NaN();
      } else if (p == 2.0) {
        for (int64_t i = s; i < e; ++i) acc += static_cast<double>(x[i]) * static_cast<double>(x[i]);
      } else if (p == 1.0) {
        for (int64_t i = s; i < e; ++i) acc += std::abs(static_cast<double>(x[i]));
      } else {
        for (int64_t i = s; i < e; ++i) acc += std::pow(std::abs(static_cast<double>(x[i])), p);
      }
      std::lock_guard<std::mutex> lock(mu);
      // NaN must survive the max (std::max would drop it).
      result = inf ? (std::isnan(acc) || std::isnan(result) ? std::numeric_limits<double>::quiet_NaN()
                                                            : std::max(result, acc))
                   : result + acc;
    });
  });
  return result;
}

void cpu_scale(const Tensor& t, double s) {
  EMBER_DISPATCH_FLOAT(t.dtype(), "clip_grad_norm_", [&] {
    using T = scalar_t;
    T* x = ptr<T>(t);
    const T f = static_cast<T>(s);
    for_range(t.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) x[i] *= f;
    });
  });
}

void cpu_unscale(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf) {
  check_unscale_args(grads, scale, found_inf, Device::cpu());
  const double inv = 1.0 / *static_cast<const double*>(scale.raw_data());
  std::atomic<bool> bad{false};
  for (const Tensor& g : grads) {
    EMBER_DISPATCH_FLOAT(g.dtype(), "GradScaler.unscale_", [&] {
      using T = scalar_t;
      T* x = ptr<T>(g);
      const T f = static_cast<T>(inv);
      for_range(g.numel(), [&](int64_t b, int64_t e) {
        T probe = 0;  // inf * 0 and NaN * 0 are NaN: one test per chunk, not per element
        for (int64_t i = b; i < e; ++i) {
          probe += x[i] * T(0);
          x[i] *= f;
        }
        if (probe != probe) bad.store(true, std::memory_order_relaxed);
      });
    });
  }
  if (bad.load()) *static_cast<double*>(found_inf.raw_data()) = 1.0;
}

void cpu_update_scale(const Tensor& scale, const Tensor& tracker, const Tensor& found_inf, const ScaleUpdate& u) {
  check_unscale_args({}, scale, found_inf, Device::cpu());
  check_unscale_args({}, tracker, found_inf, Device::cpu());
  next_scale(*static_cast<double*>(scale.raw_data()), *static_cast<double*>(tracker.raw_data()),
             *static_cast<const double*>(found_inf.raw_data()), u.growth_factor, u.backoff_factor,
             static_cast<double>(u.growth_interval));
}

void cpu_clip_value(const Tensor& t, double clip) {
  EMBER_DISPATCH_FLOAT(t.dtype(), "clip_grad_value_", [&] {
    using T = scalar_t;
    T* x = ptr<T>(t);
    const T hi = static_cast<T>(clip), lo = -hi;
    for_range(t.numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) x[i] = std::min(std::max(x[i], lo), hi);
    });
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(sgd_step_stub, CPU, cpu_sgd_step);
EMBER_REGISTER_KERNEL(adam_step_stub, CPU, cpu_adam_step);
EMBER_REGISTER_KERNEL(rmsprop_step_stub, CPU, cpu_rmsprop_step);
EMBER_REGISTER_KERNEL(adagrad_step_stub, CPU, cpu_adagrad_step);
EMBER_REGISTER_KERNEL(grad_norm_stub, CPU, cpu_grad_norm);
EMBER_REGISTER_KERNEL(scale_stub, CPU, cpu_scale);
EMBER_REGISTER_KERNEL(unscale_stub, CPU, cpu_unscale);
EMBER_REGISTER_KERNEL(update_scale_stub, CPU, cpu_update_scale);
EMBER_REGISTER_KERNEL(clip_value_stub, CPU, cpu_clip_value);

}  // namespace ember::optim
