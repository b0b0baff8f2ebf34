#include "layers/optim/optimizer.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "core/autograd/grad_mode.h"
#include "core/ops/creation.h"

namespace ember::optim {

Tensor* ParamState::find(const std::string& name) {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor* ParamState::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

Tensor Optimizer::step(const std::function<Tensor()>& closure) {
  Tensor loss;
  {
    EnableGradGuard eg;
    loss = closure();
  }
  step();
  return loss;
}

namespace {

// The count a parameter's step left on its device, as the host's.
int64_t read_device_step(const Tensor& device_step) {
  return static_cast<int64_t>(device_step.item());
}

// Clears the optimizer's skip flag however step() ends.
struct SkipFlagScope {
  Tensor& flag;
  SkipFlagScope(Tensor& f, const Tensor& value) : flag(f) { flag = value; }
  ~SkipFlagScope() { flag = Tensor(); }
  SkipFlagScope(const SkipFlagScope&) = delete;
  SkipFlagScope& operator=(const SkipFlagScope&) = delete;
};

}  // namespace

void Optimizer::step_unless(const Tensor& found_inf) {
  EMBER_CHECK(found_inf.defined() && found_inf.numel() == 1, name(),
              ".step_unless: the flag must be a one-element tensor");
  const Device dev = found_inf.device();
  bool on_flag_device = !dev.is_cpu();
  for (const auto& g : groups_)
    for (const auto& p : g.params)
      if (p.grad().defined() && p.device() != dev) on_flag_device = false;
  if (!on_flag_device) {
    if (found_inf.item() == 0) step();  // the host decides (on a GPU: one synchronisation)
    return;
  }
  NoGradGuard ng;
  SkipFlagScope scope(skip_flag_, found_inf.to(DType::Float64).contiguous());
  step();
}

DeviceStep Optimizer::count_step(ParamState& st, const Tensor& p) {
  if (!skip_flag_.defined()) {
    if (st.device_step.defined()) {
      st.step = read_device_step(st.device_step);
      st.device_step = Tensor();
    }
    ++st.step;
    return {};
  }
  if (!st.device_step.defined() || st.device_step.device() != p.device()) {
    const int64_t host = st.device_step.defined() ? read_device_step(st.device_step) : st.step;
    st.device_step = full({1}, static_cast<double>(host), {DType::Float64, p.device()});
  }
  return {skip_flag_, st.device_step};
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard ng;
  for (auto& g : groups_)
    for (auto& p : g.params) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        p.set_grad(Tensor());
      else
        grad.zero_();
    }
}

void Optimizer::validate_group(ParamGroup& group) const {
  for (const auto& [k, v] : group.options) {
    if (defaults_.count(k)) continue;
    std::string known;
    for (const auto& [dk, dv] : defaults_) known += (known.empty() ? "" : ", ") + dk;
    EMBER_FAIL(name(), ": unknown hyperparameter '", k, "' in a parameter group (known: ", known, ")");
  }
  for (const auto& [k, v] : defaults_) group.options.try_emplace(k, v);
  std::unordered_set<const TensorImpl*> in_group;
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    EMBER_CHECK(p.defined(), name(), ": parameter ", i, " of the group is undefined");
    EMBER_CHECK(p.is_floating_point(), name(), ": parameter ", i, " has dtype ", dtype_name(p.dtype()),
                "; only floating-point tensors can be optimized");
    EMBER_CHECK(p.is_leaf(), name(), ": parameter ", i, " is not a leaf tensor; optimize leaves (detach() it)");
    EMBER_CHECK(in_group.insert(p.impl()).second, name(), ": parameter ", i, " appears twice in the group");
    for (const auto& g : groups_)
      for (const auto& q : g.params)
        EMBER_CHECK(!q.is_same(p), name(), ": parameter ", i, " is already in another parameter group");
  }
}

void Optimizer::check_hyperparams(const Hyperparams& h) const {
  auto it = h.find("lr");
  if (it != h.end()) EMBER_CHECK(it->second >= 0, name(), ": invalid learning rate ", it->second, " (must be >= 0)");
  it = h.find("weight_decay");
  if (it != h.end()) EMBER_CHECK(it->second >= 0, name(), ": invalid weight_decay ", it->second, " (must be >= 0)");
  it = h.find("eps");
  if (it != h.end()) EMBER_CHECK(it->second >= 0, name(), ": invalid eps ", it->second, " (must be >= 0)");
}

void Optimizer::add_param_group(ParamGroup group) {
  validate_group(group);
  check_hyperparams(group.options);
  groups_.push_back(std::move(group));
}

ParamState& Optimizer::state(const Tensor& param) {
  for (const auto& g : groups_)
    for (const auto& p : g.params)
      if (p.is_same(param)) return state_[param.impl()];
  EMBER_FAIL(name(), ": state() of a tensor that is not one of this optimizer's parameters");
}

const ParamState* Optimizer::find_state(const Tensor& param) const {
  auto it = state_.find(param.impl());
  return it == state_.end() ? nullptr : &it->second;
}

Tensor Optimizer::grad_for_step(const Tensor& p) const {
  Tensor g = p.grad();
  if (!g.defined()) return g;
  EMBER_CHECK(p.is_contiguous(), name(), ".step: parameters must be contiguous (got strides ", shape_str(p.strides()),
              " for shape ", shape_str(p.shape()), ")");
  EMBER_CHECK(g.shape() == p.shape(), name(), ".step: gradient shape ", shape_str(g.shape()),
              " does not match parameter shape ", shape_str(p.shape()));
  EMBER_CHECK(g.device() == p.device(), name(), ".step: gradient on ", g.device(), " but parameter on ", p.device());
  if (g.dtype() != p.dtype()) g = g.to(p.dtype());
  return g.is_contiguous() ? g : g.contiguous();
}

Tensor Optimizer::state_like(const Tensor& p, double value) {
  return full(p.shape(), value, {p.dtype(), p.device()});
}

Tensor Optimizer::state_tensor(ParamState& st, const std::string& name, const Tensor& p, double init, bool* created) {
  if (created) *created = false;
  Tensor* t = st.find(name);
  if (!t) {
    if (created) *created = true;
    st.tensors.emplace_back(name, state_like(p, init));
    return st.tensors.back().second;
  }
  EMBER_CHECK(t->shape() == p.shape(), "optimizer state '", name, "' has shape ", shape_str(t->shape()),
              " but its parameter has shape ", shape_str(p.shape()));
  if (t->dtype() != p.dtype() || t->device() != p.device() || !t->is_contiguous()) {
    NoGradGuard ng;
    Tensor c = empty(p.shape(), {p.dtype(), p.device()});
    c.copy_(*t);
    *t = c;
  }
  return *t;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState s;
  s.optimizer = name();
  for (const auto& g : groups_) {
    s.groups.push_back(g.options);
    std::vector<ParamState> ps;
    for (const auto& p : g.params) {
      const ParamState* st = find_state(p);
      ParamState copy = st ? *st : ParamState{};
      if (copy.device_step.defined()) {  // the count on the device is the current one
        copy.step = read_device_step(copy.device_step);
        copy.device_step = Tensor();
      }
      ps.push_back(std::move(copy));
    }
    s.params.push_back(std::move(ps));
  }
  return s;
}

void Optimizer::load_state_dict(const OptimizerState& s) {
  std::vector<std::string> problems;
  if (s.optimizer != name()) problems.push_back("the state is for " + s.optimizer + ", not " + name());
  if (s.groups.size() != groups_.size() || s.params.size() != groups_.size()) {
    problems.push_back("the state has " + std::to_string(s.groups.size()) + " parameter groups, the optimizer has " +
                       std::to_string(groups_.size()));
  } else {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      for (const auto& [k, v] : s.groups[gi])
        if (!defaults_.count(k))
          problems.push_back("group " + std::to_string(gi) + ": unknown hyperparameter '" + k + "'");
      const auto& params = groups_[gi].params;
      if (s.params[gi].size() != params.size()) {
        problems.push_back("group " + std::to_string(gi) + ": the state has " + std::to_string(s.params[gi].size()) +
                           " parameters, the optimizer has " + std::to_string(params.size()));
        continue;
      }
      for (size_t pi = 0; pi < params.size(); ++pi)
        for (const auto& [n, t] : s.params[gi][pi].tensors) {
          const std::string where = "group " + std::to_string(gi) + " param " + std::to_string(pi) + " '" + n + "'";
          if (!t.defined())
            problems.push_back(where + ": undefined tensor");
          else if (t.shape() != params[pi].shape())
            problems.push_back(where + ": shape " + shape_str(t.shape()) + " does not match the parameter's " +
                               shape_str(params[pi].shape()));
        }
    }
  }
  if (!problems.empty()) {
    std::ostringstream os;
    os << name() << ".load_state_dict: " << problems.size() << " error(s):";
    for (const auto& p : problems) os << "\n  " << p;
    throw Error(os.str());
  }
  NoGradGuard ng;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (const auto& [k, v] : s.groups[gi]) groups_[gi].options[k] = v;
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi) {
      const Tensor& p = groups_[gi].params[pi];
      const ParamState& src = s.params[gi][pi];
      if (src.step == 0 && src.tensors.empty()) {
        state_.erase(p.impl());
        continue;
      }
      ParamState dst;
      dst.step = src.step;
      for (const auto& [n, t] : src.tensors) {
        // A private copy: the optimizer updates its state in place.
        Tensor c = empty(p.shape(), {p.dtype(), p.device()});
        c.copy_(t);
        dst.tensors.emplace_back(n, c);
      }
      state_[p.impl()] = std::move(dst);
    }
  }
}

}  // namespace ember::optim
