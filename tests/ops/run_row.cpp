#include "run_row.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

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
  if (it == cache.end())
    it = cache.emplace(row.name, run(row, make_inputs(row), Device::cpu(), false, row.float64_reference)).first;
  return it->second;
}

RowResult run_on(const OpRow& row, Device device, bool strided) {
  return run(row, make_inputs(row), device, strided, false);
}

std::string mismatch(const Tensor& got, const Tensor& want, double tol) {
  std::ostringstream os;
  if (got.shape() != want.shape()) {
    os << "shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape());
    return os.str();
  }
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 1.0;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  double worst = 0.0;
  size_t at = 0;
  int bad_special = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isinf(w[i]) || std::isnan(g[i]) || std::isinf(g[i])) {
      const bool same = (std::isnan(w[i]) && std::isnan(g[i])) || g[i] == w[i];
      if (!same && bad_special < 0) bad_special = static_cast<int>(i);
      continue;
    }
    const double e = std::abs(g[i] - w[i]);
    if (e > worst) worst = e, at = i;
  }
  if (bad_special >= 0) {
    os << "element " << bad_special << ": got " << g[bad_special] << ", want " << w[bad_special];
    return os.str();
  }
  if (worst / scale > tol) {
    os << "element " << at << ": got " << g[at] << ", want " << w[at] << " (error " << worst / scale << " relative to "
       << scale << ", tolerance " << tol << ")";
    return os.str();
  }
  return "";
}

}  // namespace ember::ops_test
