// For the rows that hold an op to the same computation composed from other ops (the *_vs_composed
// rows): the op's result is checked inside the row against the composition, values and gradients,
// on every backend, CPU level and run the harness makes (the float64 reference run included), so
// the oracle shares no code with the op's kernels; the row then returns the op's result, which the
// harness compares across backends as usual.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "op_table.h"
#include "run_row.h"

namespace ember::ops_test {

// The inputs on the CPU, gradients flowing back through the copies: the composition runs there
// whatever the backend, since it is the oracle, not the code under test, and on the emulated
// device its many small launches would cost more than the op itself.
inline Inputs on_cpu(const Inputs& x) {
  Inputs r;
  for (const Tensor& t : x) r.push_back(t.to(Device::cpu()));
  return r;
}

// Throws std::runtime_error (which fails the row on the backend at hand) unless `got` has the
// shape of `want`, the values agree element by element as the harness compares them, with rtol
// `tol` and the atol of got's dtype (tol 0: exactly), and, where both have gradients and `grads` is
// set, their gradients with respect to the row's inputs `x` for one fixed upstream gradient agree
// within five times that.
// Returns got.
inline Tensor checked(const Tensor& got, const Tensor& want, const Inputs& x, Tolerance t, bool grads = true) {
  const std::string m = mismatch(got.detach().to(Device::cpu()), want.detach().to(Device::cpu()), t);
  if (!m.empty()) throw std::runtime_error("against the composition: " + m);
  if (!grads || !GradMode::is_enabled() || !got.requires_grad() || !want.requires_grad() || got.numel() == 0)
    return got;
  std::vector<Tensor> leaves;
  for (const Tensor& t : x)
    if (t.requires_grad()) leaves.push_back(t);
  Generator gen(97);
  const Tensor up = randn(got.shape(), {.dtype = DType::Float64}, &gen);
  const std::vector<Tensor> a = autograd::grad({got}, leaves, {up.to(got.device(), got.dtype())}, true, true);
  const std::vector<Tensor> b = autograd::grad({want}, leaves, {up.to(want.device(), want.dtype())}, true, true);
  for (size_t i = 0; i < leaves.size(); ++i) {
    auto on_host = [&](const Tensor& g) {
      return g.defined() ? g.detach().to(Device::cpu()) : zeros(leaves[i].shape(), {.dtype = leaves[i].dtype()});
    };
    const std::string gm = mismatch(on_host(a[i]), on_host(b[i]), {5 * t.rtol, 5 * t.atol});
    if (!gm.empty()) throw std::runtime_error("against the composition, gradient " + std::to_string(i) + ": " + gm);
  }
  return got;
}

inline Tensor checked(const Tensor& got, const Tensor& want, const Inputs& x, double tol, bool grads = true) {
  return checked(got, want, x, Tolerance{tol, tol == 0.0 ? 0.0 : default_tolerance(got.dtype()).atol}, grads);
}

// `op` checked against `composed` evaluated on the CPU copies of the inputs.
inline Tensor checked_composed(const Tensor& op, const Inputs& x, const std::function<Tensor(const Inputs&)>& composed,
                               double tol, bool grads = true) {
  return checked(op, composed(on_cpu(x)), x, tol, grads);
}
inline Tensor checked_composed(const Tensor& op, const Inputs& x, const std::function<Tensor(const Inputs&)>& composed,
                               Tolerance tol, bool grads = true) {
  return checked(op, composed(on_cpu(x)), x, tol, grads);
}

// Adds float64 *_vs_composed rows (tolerance 1e-9) to `rows`: `diff` checks the op against its
// composition itself, and the inputs listed in `constants` take no gradient. An object rather than
// a function so that each piece of a long table names it once (`const ComposedRows composed{t};`)
// and adds its rows with `composed(name, make, diff, constants)`.
struct ComposedRows {
  std::vector<OpRow>& rows;
  void operator()(const std::string& name, std::function<Inputs(Generator&)> make,
                  std::function<Tensor(const Inputs&)> diff, std::vector<size_t> constants = {}) const {
    OpRow r{name, std::move(make), std::move(diff), 1e-9};
    r.constants = std::move(constants);
    rows.push_back(std::move(r));
  }
};

}  // namespace ember::ops_test
