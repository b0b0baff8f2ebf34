#include "layers/module.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <typeinfo>
#include <unordered_set>

#include "core/autograd/grad_mode.h"
#include "core/ops/creation.h"
#include "core/tensor.h"

namespace ember::nn {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// 1536 -> "1.5 KiB": binary units, as memory is counted.
std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string with_commas(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  EMBER_FAIL(type_name(), ": this module has no single-tensor forward(Tensor); call its own forward");
}

Tensor Module::operator()(const Tensor& input) {
  Tensor out = forward(input);
  call_forward_hooks(input, out);
  return out;
}

void Module::call_forward_hooks(const Tensor& input, const Tensor& output) {
  // Copy: a hook may register or remove hooks.
  if (!forward_hooks_.empty()) {
    auto hooks = forward_hooks_;
    for (auto& [id, hook] : hooks) hook(*this, input, output);
  }
}

std::string Module::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* dem = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && dem ? dem : mangled;
  std::free(dem);
  // Keep the class name only: "ember::nn::Conv2d" -> "Conv2d", "(anonymous namespace)::Net" -> "Net".
  const size_t lt = name.find('<');
  const size_t cut = name.rfind("::", lt == std::string::npos ? std::string::npos : lt);
  return cut == std::string::npos ? name : name.substr(cut + 2);
}

// ------------------------------------------------------------------ registration

void Module::check_new_name(const std::string& name, const char* what) const {
  EMBER_CHECK(!name.empty(), type_name(), ": cannot register a ", what, " with an empty name");
  EMBER_CHECK(name.find('.') == std::string::npos, type_name(), ": ", what, " name '", name,
              "' must not contain '.' (dots separate module levels)");
  auto taken = [&](const auto& slots) {
    return std::any_of(slots.begin(), slots.end(), [&](const auto& s) { return s.name == name; });
  };
  EMBER_CHECK(!taken(params_) && !taken(buffers_) && !taken(modules_), type_name(), ": cannot register ", what, " '",
              name, "': the name is already used by a parameter, buffer or submodule");
}

Tensor& Module::register_parameter(const std::string& name, Tensor* param, bool requires_grad) {
  EMBER_CHECK(param != nullptr, type_name(), ": register_parameter('", name, "') got a null pointer");
  check_new_name(name, "parameter");
  if (param->defined()) {
    EMBER_CHECK(param->is_leaf(), type_name(), ": parameter '", name,
                "' must be a leaf tensor (detach() it, or create it under NoGradGuard)");
    if (requires_grad || param->requires_grad()) param->requires_grad_(requires_grad);
  }
  params_.push_back({name, param, true});
  return *param;
}

Tensor& Module::register_parameter(const std::string& name, Tensor value, bool requires_grad) {
  check_new_name(name, "parameter");
  owned_tensors_.push_back(std::move(value));
  return register_parameter(name, &owned_tensors_.back(), requires_grad);
}

Tensor& Module::register_buffer(const std::string& name, Tensor* buffer, bool persistent) {
  EMBER_CHECK(buffer != nullptr, type_name(), ": register_buffer('", name, "') got a null pointer");
  check_new_name(name, "buffer");
  buffers_.push_back({name, buffer, persistent});
  return *buffer;
}

Tensor& Module::register_buffer(const std::string& name, Tensor value, bool persistent) {
  check_new_name(name, "buffer");
  owned_tensors_.push_back(std::move(value));
  return register_buffer(name, &owned_tensors_.back(), persistent);
}

Module& Module::register_module(const std::string& name, Module* module) {
  EMBER_CHECK(module != nullptr, type_name(), ": register_module('", name, "') got a null pointer");
  EMBER_CHECK(module != this, type_name(), ": a module cannot be registered as its own child ('", name, "')");
  check_new_name(name, "submodule");
  modules_.push_back({name, module});
  return *module;
}

Module& Module::register_module(const std::string& name, std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, type_name(), ": register_module('", name, "') got a null pointer");
  Module& m = register_module(name, module.get());
  owned_modules_.push_back(std::move(module));
  return m;
}

void Module::register_modules(std::initializer_list<std::pair<std::string, Module*>> modules) {
  for (const auto& [name, m] : modules) register_module(name, m);
}

// ------------------------------------------------------------------ traversal

void Module::collect_named(bool params, bool recurse, bool persistent_only, bool dedupe, const std::string& prefix,
                           NamedTensors& out) const {
  std::unordered_set<const TensorImpl*> seen;
  std::unordered_set<const Module*> visited;
  // Iterative pre-order with explicit (module, prefix) pairs so that deep trees do not recurse.
  std::vector<std::pair<const Module*, std::string>> stack{{this, prefix}};
  while (!stack.empty()) {
    auto [m, pre] = stack.back();
    stack.pop_back();
    if (dedupe && !visited.insert(m).second) continue;
    for (const TensorSlot& s : params ? m->params_ : m->buffers_) {
      if (!s.tensor->defined()) continue;
      if (persistent_only && !s.persistent) continue;
      if (dedupe && !seen.insert(s.tensor->impl()).second) continue;
      out.emplace_back(join(pre, s.name), *s.tensor);
    }
    if (!recurse) break;
    for (auto it = m->modules_.rbegin(); it != m->modules_.rend(); ++it)
      stack.emplace_back(it->module, join(pre, it->name));
  }
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> r;
  for (auto& [n, t] : named_parameters(recurse)) r.push_back(t);
  return r;
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect_named(true, recurse, false, true, "", out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> r;
  for (auto& [n, t] : named_buffers(recurse)) r.push_back(t);
  return r;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect_named(false, recurse, false, true, "", out);
  return out;
}

std::vector<Module*> Module::children() const {
  std::vector<Module*> r;
  for (const auto& s : modules_) r.push_back(s.module);
  return r;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() const {
  std::vector<std::pair<std::string, Module*>> r;
  for (const auto& s : modules_) r.emplace_back(s.name, s.module);
  return r;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::unordered_set<const Module*> visited;
  std::vector<std::pair<Module*, std::string>> stack{{this, ""}};
  while (!stack.empty()) {
    auto [m, pre] = stack.back();
    stack.pop_back();
    if (!visited.insert(m).second) continue;
    out.emplace_back(pre, m);
    for (auto it = m->modules_.rbegin(); it != m->modules_.rend(); ++it)
      stack.emplace_back(it->module, join(pre, it->name));
  }
  return out;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> r;
  for (auto& [n, m] : named_modules()) r.push_back(m);
  return r;
}

Module& Module::child(const std::string& name) const {
  for (const auto& s : modules_)
    if (s.name == name) return *s.module;
  EMBER_FAIL(type_name(), ": no submodule named '", name, "'");
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

// ------------------------------------------------------------------ modes and placement

void Module::train(bool on) {
  training_ = on;
  for (auto& s : modules_) s.module->train(on);
}

void Module::convert(std::optional<Device> device, std::optional<DType> dtype) {
  if (dtype)
    EMBER_CHECK(is_floating(*dtype), type_name(), ".to: modules convert to floating-point dtypes only, got ",
                dtype_name(*dtype));
  std::unordered_set<const TensorImpl*> done;
  NoGradGuard ng;
  auto move_one = [&](Tensor& t) {
    if (!t.defined() || !done.insert(t.impl()).second) return;
    const Device dev = device.value_or(t.device());
    const DType dt = dtype && t.is_floating_point() ? *dtype : t.dtype();
    if (t.device() == dev && t.dtype() == dt) return;
    // Swap the data under the existing TensorImpl so every handle to this tensor (an optimizer's,
    // a tied weight's) follows, and the tensor stays the same leaf with the same requires_grad.
    Tensor moved = t.detach().to(dev, dt);
    TensorImpl* impl = t.impl();
    impl->storage = moved.impl()->storage;
    impl->shape = moved.impl()->shape;
    impl->strides = moved.impl()->strides;
    impl->offset = moved.impl()->offset;
    impl->dtype = moved.impl()->dtype;
    Tensor g = t.grad();
    if (g.defined()) t.set_grad(g.to(dev, dt));
  };
  for (Module* m : modules()) {
    for (auto& s : m->params_) move_one(*s.tensor);
    for (auto& s : m->buffers_) move_one(*s.tensor);
  }
}

void Module::to(Device device) {
  convert(device, std::nullopt);
}

void Module::to(DType dtype) {
  convert(std::nullopt, dtype);
}

void Module::to(Device device, DType dtype) {
  convert(device, dtype);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      NoGradGuard ng;
      g.zero_();
    }
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& s : modules_) s.module->apply(fn);
  fn(*this);
}

// ------------------------------------------------------------------ state

StateDict Module::state_dict() const {
  StateDict out;
  std::vector<std::pair<const Module*, std::string>> stack{{this, ""}};
  while (!stack.empty()) {
    auto [m, pre] = stack.back();
    stack.pop_back();
    for (const auto& s : m->params_)
      if (s.tensor->defined()) out.emplace_back(join(pre, s.name), s.tensor->detach());
    for (const auto& s : m->buffers_)
      if (s.tensor->defined() && s.persistent) out.emplace_back(join(pre, s.name), s.tensor->detach());
    for (auto it = m->modules_.rbegin(); it != m->modules_.rend(); ++it)
      stack.emplace_back(it->module, join(pre, it->name));
  }
  return out;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  // Every slot the module expects, under every name it is reachable by.
  std::vector<std::pair<std::string, Tensor*>> slots;
  std::vector<std::pair<const Module*, std::string>> stack{{this, ""}};
  while (!stack.empty()) {
    auto [m, pre] = stack.back();
    stack.pop_back();
    for (const auto& s : m->params_)
      if (s.tensor->defined()) slots.emplace_back(join(pre, s.name), s.tensor);
    for (const auto& s : m->buffers_)
      if (s.tensor->defined() && s.persistent) slots.emplace_back(join(pre, s.name), s.tensor);
    for (auto it = m->modules_.rbegin(); it != m->modules_.rend(); ++it)
      stack.emplace_back(it->module, join(pre, it->name));
  }

  LoadResult res;
  std::vector<std::string> problems;
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  std::unordered_set<std::string> expected;
  for (auto& [name, slot] : slots) {
    expected.insert(name);
    const std::string& key = name;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(dict.begin(), dict.end(), [&](const auto& e) { return e.first == key; });
    if (it == dict.end()) {
      res.missing_keys.push_back(name);
      continue;
    }
    const Tensor& src = it->second;
    if (!src.defined()) {
      problems.push_back("'" + name + "': the dict's tensor is undefined");
    } else if (src.shape() != slot->shape()) {
      problems.push_back("'" + name + "': shape mismatch, the module has " + shape_str(slot->shape()) +
                         ", the dict has " + shape_str(src.shape()));
    } else if (src.dtype() != slot->dtype()) {
      problems.push_back("'" + name + "': dtype mismatch, the module has " + dtype_name(slot->dtype()) +
                         ", the dict has " + dtype_name(src.dtype()));
    } else {
      copies.emplace_back(slot, &src);
    }
  }
  for (const auto& [name, t] : dict)
    if (!expected.count(name)) res.unexpected_keys.push_back(name);
  if (strict) {
    for (const auto& k : res.missing_keys) problems.push_back("missing key '" + k + "'");
    for (const auto& k : res.unexpected_keys) problems.push_back("unexpected key '" + k + "'");
  }
  if (!problems.empty()) {
    std::ostringstream os;
    os << "load_state_dict: " << problems.size() << " error(s) loading into " << type_name() << ":";
    for (const auto& p : problems) os << "\n  " << p;
    throw Error(os.str());
  }
  NoGradGuard ng;
  for (auto& [dst, src] : copies) {
    dst->copy_(*src);
  }
  return res;
}

// ------------------------------------------------------------------ hooks and printing

int64_t Module::register_forward_hook(ForwardHook hook) {
  forward_hooks_.emplace_back(next_hook_id_, std::move(hook));
  return next_hook_id_++;
}

void Module::remove_forward_hook(int64_t id) {
  std::erase_if(forward_hooks_, [id](const auto& h) { return h.first == id; });
}

std::string Module::summary(const Shape& input_shape, DType dtype) {
  Device dev = Device::cpu();
  for (const Tensor& p : parameters()) {
    dev = p.device();
    break;
  }
  return summary("input " + shape_str(input_shape), [&] { (*this)(zeros(input_shape, {dtype, dev})); });
}

std::string Module::summary(const std::string& input, const std::function<void()>& run) {
  struct Row {
    std::string name, type, shape;
    int64_t params;
    int64_t output_bytes;
  };
  auto named = named_modules();
  std::vector<Row> rows;
  std::unordered_set<const Module*> counted;
  std::vector<std::pair<Module*, int64_t>> hook_ids;
  std::vector<std::pair<Module*, bool>> modes;
  for (auto& [name, m] : named) {
    modes.emplace_back(m, m->training_);
    const bool leaf = m->modules_.empty();
    const bool has_own = !m->params_.empty();
    if (m != this ? !(leaf || has_own) : !leaf) continue;
    std::string row_name = name;
    hook_ids.emplace_back(
        m, m->register_forward_hook([&rows, &counted, row_name](Module& mod, const Tensor&, const Tensor& out) {
          int64_t n = 0;
          if (counted.insert(&mod).second)
            for (const Tensor& p : mod.parameters(false)) n += p.numel();
          rows.push_back({row_name, mod.type_name(), shape_str(out.shape()), n,
                          out.numel() * static_cast<int64_t>(out.itemsize())});
        }));
  }
  auto restore = [&] {
    for (auto& [m, id] : hook_ids) m->remove_forward_hook(id);
    for (auto& [m, mode] : modes) m->training_ = mode;
  };
  try {
    NoGradGuard ng;
    for (auto& [m, mode] : modes) m->training_ = false;
    run();
  } catch (...) {
    restore();
    throw;
  }
  restore();

  auto label = [](const Row& r) { return r.name.empty() ? r.type : r.name + " (" + r.type + ")"; };
  std::vector<std::string> heads{"Layer (type)", "Output Shape", "Param #"};
  size_t w0 = 24, w1 = 20, w2 = 10;
  for (auto& r : rows) {
    w0 = std::max(w0, label(r).size());
    w1 = std::max(w1, r.shape.size());
    w2 = std::max(w2, with_commas(r.params).size());
  }
  w0 += 2;
  w1 += 2;
  const size_t width = w0 + w1 + w2;
  std::ostringstream os;
  os << std::left << std::setw(static_cast<int>(w0)) << heads[0] << std::setw(static_cast<int>(w1)) << heads[1]
     << std::right << std::setw(static_cast<int>(w2)) << heads[2] << "\n"
     << std::string(width, '=') << "\n";
  for (auto& r : rows)
    os << std::left << std::setw(static_cast<int>(w0)) << label(r) << std::setw(static_cast<int>(w1)) << r.shape
       << std::right << std::setw(static_cast<int>(w2)) << with_commas(r.params) << "\n";
  const int64_t total = num_parameters(), trainable = num_parameters(true);
  auto bytes_of = [](const std::vector<Tensor>& ts) {
    int64_t b = 0;
    for (const Tensor& t : ts) b += t.numel() * static_cast<int64_t>(t.itemsize());
    return b;
  };
  int64_t outputs = 0;
  for (const Row& r : rows) outputs += r.output_bytes;
  os << std::string(width, '=') << "\n"
     << "Total params: " << with_commas(total) << "\n"
     << "Trainable params: " << with_commas(trainable) << "\n"
     << "Non-trainable params: " << with_commas(total - trainable) << "\n"
     << "Memory: parameters " << human_bytes(bytes_of(parameters())) << ", buffers " << human_bytes(bytes_of(buffers()))
     << ", layer outputs for " << input << " " << human_bytes(outputs)
     << " (what a training step keeps for backward, roughly)\n";
  return os.str();
}

void Module::repr_into(std::string& out, int indent) const {
  out += type_name() + "(" + extra_repr();
  if (!modules_.empty()) {
    out += "\n";
    for (const auto& s : modules_) {
      out += std::string(static_cast<size_t>(indent + 2), ' ') + "(" + s.name + "): ";
      s.module->repr_into(out, indent + 2);
      out += "\n";
    }
    out += std::string(static_cast<size_t>(indent), ' ');
  }
  out += ")";
}

std::string Module::repr() const {
  std::string out;
  repr_into(out, 0);
  return out;
}

}  // namespace ember::nn
