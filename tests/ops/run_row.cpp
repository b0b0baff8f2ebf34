#include "run_row.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "core/autograd/grad_mode.h"

namespace ember::ops_test {
namespace {

uint64_t seed_of(const std::string& name) {
  return std::hash<std::string>{}(name) % 1000003 + 1;
}

// The same values as x, on `device`, in a non-contiguous layout where x has two trailing dims of
// size > 1 and `strided` is set: the two trailing dims are stored transposed.
Tensor place(const Tensor& x, Device device, bool strided) {
  NoGradGuard ng;
  if (strided && x.dim() >= 2 && x.size(-1) > 1 && x.size(-2) > 1) {
    const Tensor stored = x.transpose(-1, -2).contiguous().to(device);
    return stored.transpose(-1, -2).detach();
  }
  return x.to(device).detach();
}

Tensor upstream_for(const Tensor& out, const std::string& name) {
  Generator g(seed_of(name) + 17);
  return randn(out.shape(), {.dtype = DType::Float64}, &g);
}

RowResult run(const OpRow& row, const Inputs& base, Device device, bool strided, bool to_float64) {
  Inputs in;
  for (size_t i = 0; i < base.size(); ++i) {
    const Tensor& x = base[i];
    Tensor c = to_float64 && is_floating(x.dtype()) ? x.to(DType::Float64) : x;
    Tensor d = place(c, device, strided);
    if (is_floating(d.dtype()) && !is_constant(row, i)) d.requires_grad_(true);
    in.push_back(d);
  }
  RowResult r;
  const Tensor out = row.f(in);
  {
    NoGradGuard ng;
    r.out = out.detach().to(Device::cpu());
  }
  r.grads.resize(in.size());
  if (!row.grad || !out.requires_grad() || out.numel() == 0) return r;
  const Tensor w = upstream_for(out, row.name).to(out.device(), out.dtype());
  sum(mul(out, w)).backward();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].requires_grad() && in[i].grad().defined()) r.grads[i] = in[i].grad().to(Device::cpu());
  return r;
}

}  // namespace

bool is_constant(const OpRow& row, size_t i) {
  return std::find(row.constants.begin(), row.constants.end(), i) != row.constants.end();
}

Inputs make_inputs(const OpRow& row) {
  Generator g(seed_of(row.name));
  return row.inputs(g);
}

const RowResult& reference(const OpRow& row) {
  static std::mutex mu;
  static std::map<std::string, RowResult> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(row.name);
  if (it != cache.end()) return it->second;
  if (!row.oracle) return cache.emplace(row.name, run(row, make_inputs(row), Device::cpu(), false, true)).first->second;
  if (row.grad) throw std::logic_error(row.name + ": a row with an oracle compares values only (grad false)");
  RowResult r;
  {
    NoGradGuard ng;
    r.out = row.oracle(make_inputs(row)).detach().to(Device::cpu());
  }
  r.grads.resize(make_inputs(row).size());
  return cache.emplace(row.name, std::move(r)).first->second;
}

const RowResult& cross_reference(const OpRow& row, const std::string& group, Device emulated,
                                 const std::function<void()>& enter, const std::function<void()>& leave) {
  static std::mutex mu;
  static std::map<std::string, RowResult> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (row.grad) throw std::logic_error(row.name + ": a cross_reference row compares values only (grad false)");
  const bool on_emulator = group == "cpu";
  const std::string key = row.name + (on_emulator ? "@emu" : "@cpu");
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (!on_emulator) return cache.emplace(key, run(row, make_inputs(row), Device::cpu(), false, false)).first->second;
  enter();
  RowResult r = run(row, make_inputs(row), emulated, false, false);
  leave();
  return cache.emplace(key, std::move(r)).first->second;
}

RowResult run_on(const OpRow& row, Device device, bool strided) {
  return run(row, make_inputs(row), device, strided, false);
}

// The defaults, for a result in dt against the float64 reference (or a float64 result against the
// float64 reference at another CPU level or thread order, or an oracle):
//   float64   rtol 1e-10, atol 1e-12: only the order of the operations differs (a vector width, a
//             block's partial sums), a few units of 2^-53 per operation on inputs of order one
//   float32   rtol 1e-5, atol 1e-6: about 80 units of 2^-24 in the element, and a floor of eight
//             units of the inputs' (order one) rounding for an element that cancels to near zero
//   float16   rtol 2e-3, atol 1e-4: two units of 2^-10 (the result's own rounding is one half)
//   bfloat16  rtol 1.6e-2, atol 1e-3: two units of 2^-7
//   integers and bool exact
// A row whose op accumulates many terms or loses more sets its own bound, and says why.
Tolerance default_tolerance(DType dt) {
  switch (dt) {
    case DType::Float64:
      return {1e-10, 1e-12};
    case DType::Float32:
      return {1e-5, 1e-6};
    case DType::Float16:
      return {2e-3, 1e-4};
    case DType::BFloat16:
      return {1.6e-2, 1e-3};
    default:
      return {0.0, 0.0};
  }
}

Tolerance tolerance_for(const OpRow& row, DType dt) {
  const Tolerance d = default_tolerance(dt);
  Tolerance t{row.tol < 0 ? d.rtol : row.tol, row.atol < 0 ? d.atol : row.atol};
  if (row.tol == 0.0 && row.atol < 0) t.atol = 0.0;  // exact
  return t;
}

std::string mismatch(const Tensor& got, const Tensor& want, Tolerance tol) {
  std::ostringstream os;
  os.precision(10);
  if (got.shape() != want.shape()) {
    os << "shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape());
    return os.str();
  }
  // Integer and bool results as int64: exact beyond 2^53.
  if (!is_floating(got.dtype()) && !is_floating(want.dtype())) {
    const std::vector<int64_t> g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
    for (size_t i = 0; i < g.size(); ++i) {
      if (g[i] == w[i]) continue;
      const long double e = std::abs(static_cast<long double>(g[i]) - static_cast<long double>(w[i]));
      if (e > tol.atol + tol.rtol * std::abs(static_cast<long double>(w[i]))) {
        os << "element " << i << ": got " << g[i] << ", want " << w[i];
        return os.str();
      }
    }
    return "";
  }
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double worst = 0.0;  // the largest error / bound (> 1: out of bounds)
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isinf(w[i]) || std::isnan(g[i]) || std::isinf(g[i])) {
      if (!(std::isnan(w[i]) && std::isnan(g[i])) && g[i] != w[i]) {
        os << "element " << i << ": got " << g[i] << ", want " << w[i];
        return os.str();
      }
      continue;
    }
    const double e = std::abs(g[i] - w[i]), bound = tol.atol + tol.rtol * std::abs(w[i]);
    if (e == 0.0) continue;
    const double r = bound > 0.0 ? e / bound : INFINITY;
    if (r > worst) worst = r, at = i;
  }
  if (worst > 1.0) {
    os << "element " << at << ": got " << g[at] << ", want " << w[at] << " (error " << std::abs(g[at] - w[at])
       << ", bound " << tol.atol << " + " << tol.rtol << " * |want| = " << tol.atol + tol.rtol * std::abs(w[at]) << ")";
    return os.str();
  }
  return "";
}

}  // namespace ember::ops_test
