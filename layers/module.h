// nn::Module, the base of every layer and model: it keeps named parameters, buffers and
// submodules in registration order, and gives the whole tree the operations training needs —
// recursive parameter lists with dotted names (as PyTorch's), train/eval, device and dtype moves,
// zero_grad, state_dict round trips that report every mismatch at once, forward hooks and a
// Keras-style summary table.
//
// Registration stores pointers to the registered members (a layer's `Tensor weight`, a model's
// `nn::Conv2d c1`), so a Module can be neither copied nor moved: a copy would alias or dangle.
// Containers (Sequential, ModuleList) therefore hold their elements through std::shared_ptr.
// Things registered by value (register_parameter(name, tensor), register_module(name, ptr)) are
// owned by the module itself and live as long as it does.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::nn {

// Name -> tensor in a fixed order (registration order, depth first). state_dict() returns one.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;

// What a non-strict load_state_dict skipped.
struct LoadResult {
  std::vector<std::string> missing_keys;     // in the module, not in the dict
  std::vector<std::string> unexpected_keys;  // in the dict, not in the module
};

class Module;
// Called after a module's operator() with the module, its input and its output.
using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // The single-tensor forward that Sequential and summary() use. Layers override it; modules with
  // other signatures (RNNs, losses with targets) declare their own forward and leave this one
  // throwing.
  virtual Tensor forward(const Tensor& input);
  // forward() followed by this module's forward hooks.
  Tensor operator()(const Tensor& input);

  // A short type name for printing ("Conv2d"); defaults to the demangled C++ class name.
  virtual std::string type_name() const;
  // Extra text shown after the type name in printouts, e.g. "in=3, out=4, bias".
  virtual std::string extra_repr() const { return {}; }

  // ---- registration. Names are non-empty, contain no '.', and are unique across parameters,
  // buffers and submodules of this module. An undefined tensor may be registered (an absent
  // bias): it is skipped by parameters() and state_dict() until it is defined.
  Tensor& register_parameter(const std::string& name, Tensor* param, bool requires_grad = true);
  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);  // owned
  Tensor& register_buffer(const std::string& name, Tensor* buffer, bool persistent = true);
  Tensor& register_buffer(const std::string& name, Tensor value, bool persistent = true);  // owned
  Module& register_module(const std::string& name, Module* module);
  Module& register_module(const std::string& name, std::shared_ptr<Module> module);  // shared ownership
  void register_modules(std::initializer_list<std::pair<std::string, Module*>> modules);

  // ---- traversal (deterministic: registration order, parents before children). Parameters
  // shared between modules appear once, under the first name they are reached by.
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Module*> children() const;
  std::vector<std::pair<std::string, Module*>> named_children() const;
  // This module (name "") and every descendant, pre-order, with dotted names.
  std::vector<std::pair<std::string, Module*>> named_modules();
  std::vector<Module*> modules();
  // Looks a direct child up by name; ember::Error when there is none.
  Module& child(const std::string& name) const;

  // ---- modes and placement
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Converts every parameter and buffer in place: the tensors keep their identity (handles held
  // elsewhere, e.g. by an optimizer, see the new data), stay leaves and keep requires_grad;
  // existing gradients are converted too. to(DType) converts floating-point tensors only (integer
  // buffers such as num_batches_tracked keep their dtype), as PyTorch does.
  void to(Device device);
  void to(DType dtype);
  void to(Device device, DType dtype);
  // Drops every parameter's gradient (sets it undefined, as PyTorch 2's default set_to_none=True:
  // the next backward writes a fresh gradient instead of adding to zeros). With set_to_none =
  // false the existing gradients are zeroed in place.
  void zero_grad(bool set_to_none = true);
  // Calls fn on every submodule (children first, recursively) and then on this module.
  void apply(const std::function<void(Module&)>& fn);

  // ---- state
  // Parameters and persistent buffers, dotted names, each module's own parameters then its
  // buffers then its children. Tensors are detached aliases of the module's storage.
  StateDict state_dict() const;
  // Copies values from `dict` (without autograd). Shape or dtype mismatches are always errors;
  // with strict, missing and unexpected names are errors too. Every problem is listed in one
  // ember::Error and nothing is copied when there is any. Non-strict returns what was skipped.
  LoadResult load_state_dict(const StateDict& dict, bool strict = true);

  // ---- hooks and printing
  // Returns an id for remove_forward_hook.
  int64_t register_forward_hook(ForwardHook hook);
  void remove_forward_hook(int64_t id);
  bool has_forward_hooks() const { return !forward_hooks_.empty(); }
  // Runs forward on zeros of `input_shape` (batch dimension included) without gradients and in
  // eval mode (restored afterwards, so batch-norm statistics are untouched), and returns a
  // Keras-style table with a row per call of a leaf layer (or a module with parameters of its
  // own) made through operator() — name, type, output shape, its own parameter count (on its
  // first call) — the total and trainable counts, and the memory of the parameters, the buffers
  // and the layers' outputs for this input.
  std::string summary(const Shape& input_shape, DType dtype = DType::Float32);
  // The same table for a module whose forward takes more than one tensor: `run` calls it (on
  // inputs of batch 1) and `input` says what it was given ("tokens [1, 48] and their lengths").
  std::string summary(const std::string& input, const std::function<void()>& run);
  // The module tree, PyTorch style.
  std::string repr() const;

  // Parameter count, all or only those requiring grad.
  int64_t num_parameters(bool trainable_only = false) const;

 protected:
  // Calls this module's forward hooks; operator() does, and so do the operator()s of modules whose
  // forward takes other arguments (the RNNs), with their main input and output.
  void call_forward_hooks(const Tensor& input, const Tensor& output);

  bool training_ = true;

 private:
  struct TensorSlot {
    std::string name;
    Tensor* tensor;
    bool persistent = true;  // buffers only
  };
  struct ModuleSlot {
    std::string name;
    Module* module;
  };
  void check_new_name(const std::string& name, const char* what) const;
  void collect_named(bool params, bool recurse, bool persistent_only, bool dedupe, const std::string& prefix,
                     NamedTensors& out) const;
  void convert(std::optional<Device> device, std::optional<DType> dtype);
  void repr_into(std::string& out, int indent) const;

  std::vector<TensorSlot> params_;
  std::vector<TensorSlot> buffers_;
  std::vector<ModuleSlot> modules_;
  std::deque<Tensor> owned_tensors_;  // deque: growing it keeps references stable
  std::vector<std::shared_ptr<Module>> owned_modules_;
  std::vector<std::pair<int64_t, ForwardHook>> forward_hooks_;
  int64_t next_hook_id_ = 0;
};

// Shorthand for containers: nn::make<nn::Linear>(4, 8).
template <typename M, typename... Args>
std::shared_ptr<M> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

}  // namespace ember::nn
