// Containers of modules. Sequential chains single-tensor modules (each element's operator(), so
// forward hooks and summary() see every layer; nn::fuse turns on its fused runs, layers/fusion.h); ModuleList only
// holds and registers modules for a forward written by hand; Lambda wraps a function as a parameterless layer. Elements
// are held through std::shared_ptr because modules cannot be moved (see module.h); nn::make<T>(args...) builds one.
// Elements are named "0", "1", ... as in PyTorch unless a name is given.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/module.h"

namespace ember::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  template <typename... Ms>
  explicit Sequential(std::shared_ptr<Ms>... modules) {
    (push_back(std::shared_ptr<Module>(std::move(modules))), ...);
  }
  // Named elements: Sequential({{"conv", make<Conv2d>(1, 8, 3)}, {"act", make<ReLU>()}}).
  explicit Sequential(std::vector<std::pair<std::string, std::shared_ptr<Module>>> named);

  Sequential& push_back(std::shared_ptr<Module> module);
  Sequential& push_back(const std::string& name, std::shared_ptr<Module> module);
  // Constructs the element in place and returns it.
  template <typename M, typename... Args>
  M& emplace_back(Args&&... args) {
    auto m = std::make_shared<M>(std::forward<Args>(args)...);
    M& ref = *m;
    push_back(std::move(m));
    return ref;
  }

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  Module& operator[](size_t i) const;  // ember::Error when out of range
  // The element as its concrete type; ember::Error if it is another type.
  template <typename M>
  M& at(size_t i) const {
    M* p = dynamic_cast<M*>(&(*this)[i]);
    EMBER_CHECK(p != nullptr, "Sequential::at: element ", i, " is a ", (*this)[i].type_name());
    return *p;
  }
  const std::vector<std::shared_ptr<Module>>& items() const { return items_; }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // Runs the elements in order, each through its operator(); with fusion on, some runs of them
  // as fused ops (layers/fusion.h).
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sequential"; }

  // Fusion (layers/fusion.h): off until nn::fuse(model), or this, turns it on.
  void set_fusion(bool on) { fusion_ = on; }
  bool fusion() const { return fusion_; }

 private:
  std::vector<std::shared_ptr<Module>> items_;
  bool fusion_ = false;
};

class ModuleList : public Module {
 public:
  ModuleList() = default;
  template <typename... Ms>
  explicit ModuleList(std::shared_ptr<Ms>... modules) {
    (push_back(std::shared_ptr<Module>(std::move(modules))), ...);
  }
  ModuleList& push_back(std::shared_ptr<Module> module);
  template <typename M, typename... Args>
  M& emplace_back(Args&&... args) {
    auto m = std::make_shared<M>(std::forward<Args>(args)...);
    M& ref = *m;
    push_back(std::move(m));
    return ref;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  Module& operator[](size_t i) const;
  template <typename M>
  M& at(size_t i) const {
    M* p = dynamic_cast<M*>(&(*this)[i]);
    EMBER_CHECK(p != nullptr, "ModuleList::at: element ", i, " is a ", (*this)[i].type_name());
    return *p;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// A parameterless layer from a function, e.g. Lambda([](const Tensor& x) { return x * 2.0; }).
class Lambda : public Module {
 public:
  explicit Lambda(std::function<Tensor(const Tensor&)> fn, std::string name = "Lambda")
      : fn_(std::move(fn)), name_(std::move(name)) {}
  Tensor forward(const Tensor& input) override { return fn_(input); }
  std::string type_name() const override { return name_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string name_;
};

}  // namespace ember::nn
