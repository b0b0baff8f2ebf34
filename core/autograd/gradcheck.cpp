#include "core/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/ops.h"

namespace ember {

namespace {

// Visits every element of a (possibly strided) float64 tensor through a pointer.
template <typename F>
void for_each_element(const Tensor& t, const F& f) {
  const int64_t n = t.numel();
  const int64_t nd = t.dim();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  double* base = static_cast<double*>(t.raw_data());
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += idx[d] * t.strides()[d];
    f(flat, base + off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions opts) {
  std::vector<Tensor> wrt;
  std::vector<size_t> wrt_index;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    EMBER_CHECK(t.dtype() == DType::Float64, "gradcheck: input ", i, " must be float64, got ", dtype_name(t.dtype()));
    EMBER_CHECK(t.device().is_cpu(), "gradcheck: input ", i, " must be on the cpu");
    wrt.push_back(t);
    wrt_index.push_back(i);
  }
  EMBER_CHECK(!wrt.empty(), "gradcheck: no input requires grad");

  Tensor out0 = fn(inputs);
  EMBER_CHECK(out0.dtype() == DType::Float64, "gradcheck: the function must return float64, got ",
              dtype_name(out0.dtype()));
  Generator gen(1234567);
  Tensor proj = randn(out0.shape(), {.dtype = DType::Float64}, &gen);
  auto scalar = [&](const Tensor& out) { return sum(mul(out, proj)); };

  GradcheckResult res;
  std::vector<Tensor> analytical;
  if (out0.requires_grad()) {
    analytical = autograd::grad({scalar(out0)}, wrt, {}, false, /*allow_unused=*/true);
  } else {
    analytical.resize(wrt.size());
  }

  double worst = -1;
  std::ostringstream worst_msg;
  for (size_t k = 0; k < wrt.size(); ++k) {
    Tensor a = analytical[k].defined() ? analytical[k].contiguous() : zeros_like(wrt[k]);
    std::vector<double> av = a.to_vector<double>();
    NoGradGuard ng;
    for_each_element(wrt[k], [&](int64_t flat, double* p) {
      const double orig = *p;
      *p = orig + opts.eps;
      double fp = scalar(fn(inputs)).item();
      *p = orig - opts.eps;
      double fm = scalar(fn(inputs)).item();
      *p = orig;
      double num = (fp - fm) / (2 * opts.eps);
      double an = av[static_cast<size_t>(flat)];
      double err = std::abs(an - num);
      bool bad = !(err <= opts.atol + opts.rtol * std::abs(num)) || std::isnan(an) != std::isnan(num);
      double score = err / (opts.atol + opts.rtol * std::abs(num));
      if (std::isnan(score)) score = 1e300;
      res.max_abs_error = std::max(res.max_abs_error, err);
      if (bad) res.ok = false;
      if (score > worst) {
        worst = score;
        worst_msg.str("");
        worst_msg << "input " << wrt_index[k] << " element " << flat << ": analytical " << an << ", numerical " << num
                  << " (abs error " << err << ")";
      }
    });
  }
  res.message = (res.ok ? "ok; worst " : "gradcheck failed; worst ") + worst_msg.str();
  return res;
}

}  // namespace ember
