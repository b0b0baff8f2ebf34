// The optimizer base: parameter groups with their own hyperparameters, per-parameter state
// (named tensors such as Adam's moments, plus a step count), zero_grad, and a plain-struct
// state_dict that checkpoint code serialises. Concrete optimizers (sgd.h, adam.h, rmsprop.h,
// adagrad.h) implement step() as one fused kernel call per parameter (fused_kernels.h).
//
// Hyperparameters are kept by name ("lr", "momentum", "beta1", ...; flags as 0/1) so that a
// learning-rate schedule or a checkpoint can read and write any optimizer's groups the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

using Hyperparams = std::map<std::string, double>;

// A group of parameters and its hyperparameters. Given to a constructor, `options` overrides the
// optimizer's defaults for this group (unknown names are an error); after construction it holds
// every hyperparameter of the group.
struct ParamGroup {
  std::vector<Tensor> params;
  Hyperparams options;
};

// One parameter's optimizer state: a step count and named tensors of the parameter's shape.
struct ParamState {
  int64_t step = 0;
  std::vector<std::pair<std::string, Tensor>> tensors;
  // While steps are decided on the parameter's device (step_unless), the count lives there: a
  // one-element float64 that replaces `step` until state_dict or an ordinary step reads it back.
  Tensor device_step;
  Tensor* find(const std::string& name);
  const Tensor* find(const std::string& name) const;
};

// Everything an optimizer needs to resume: its kind, each group's hyperparameters and each
// parameter's state, in group order and, within a group, in parameter order (parameters are
// identified by position, as in PyTorch).
struct OptimizerState {
  std::string optimizer;
  std::vector<Hyperparams> groups;
  std::vector<std::vector<ParamState>> params;  // [group][param]; step 0 and no tensors = no state yet
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (parameters without one are skipped).
  virtual void step() = 0;
  // The update unless `found_inf` (a one-element tensor, as GradScaler keeps) is nonzero. When it
  // and every parameter with a gradient are on one device other than the CPU, that device
  // decides: the update kernels read the flag and each parameter's step count there, and the host
  // never waits (on a GPU no synchronisation, and the step can be captured in a CUDA graph);
  // otherwise the host reads the flag and steps or not.
  void step_unless(const Tensor& found_inf);
  // Re-evaluates the loss with gradients enabled (the closure zeroes gradients and calls
  // backward), then steps; returns the loss.
  Tensor step(const std::function<Tensor()>& closure);
  // Drops (set_to_none, the default as in PyTorch 2) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

  virtual std::string name() const = 0;
  // The hyperparameter names this optimizer understands, with their defaults.
  const Hyperparams& defaults() const { return defaults_; }
  // Derived constructors add their groups through this (so check_hyperparams dispatches).
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  // The state of `param` (created empty on first use); nullptr / Error for a tensor this
  // optimizer does not hold.
  ParamState& state(const Tensor& param);
  const ParamState* find_state(const Tensor& param) const;

  OptimizerState state_dict() const;
  // Checks the kind, the group and parameter counts, hyperparameter names and every state
  // tensor's shape, reports all mismatches in one ember::Error (changing nothing), then copies
  // (state tensors are converted to their parameter's device and dtype).
  void load_state_dict(const OptimizerState& state);

 protected:
  explicit Optimizer(Hyperparams defaults) : defaults_(std::move(defaults)) {}
  // Checks a group's options against defaults_, merges them, and checks the parameters.
  void validate_group(ParamGroup& group) const;
  // Hook for subclasses to check hyperparameter values ("lr >= 0", "nesterov needs momentum").
  virtual void check_hyperparams(const Hyperparams& h) const;
  // For step(): the gradient of `p` as a contiguous tensor of p's dtype, or undefined when p has
  // none; checks that p is contiguous.
  Tensor grad_for_step(const Tensor& p) const;
  // For step(), once per parameter that steps: inside step_unless on a device, the skip flag and
  // p's count on the device (created from the host's count), which the kernel advances; otherwise
  // undefined, the host's count brought back first if an earlier step left it on the device, and
  // advanced here. Returns the device side for the kernel's hyperparameters.
  DeviceStep count_step(ParamState& st, const Tensor& p);
  // A zero-filled (or `value`-filled) state tensor shaped like p.
  static Tensor state_like(const Tensor& p, double value = 0.0);
  // The state tensor `name` of p: created filled with `init` when missing (`*created` says so),
  // and converted to p's dtype and device when p has moved since (Module::to after the
  // optimizer was made), so a kernel always sees matching operands.
  static Tensor state_tensor(ParamState& st, const std::string& name, const Tensor& p, double init = 0.0,
                             bool* created = nullptr);

  Hyperparams defaults_;
  std::vector<ParamGroup> groups_;
  Tensor skip_flag_;  // set by step_unless for the step() it makes on a device
  std::unordered_map<const TensorImpl*, ParamState> state_;
};

}  // namespace ember::optim
