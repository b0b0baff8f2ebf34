#include "layers/container.h"

#include "layers/fusion.h"

namespace ember::nn {

Sequential::Sequential(std::vector<std::pair<std::string, std::shared_ptr<Module>>> named) {
  for (auto& [name, m] : named) push_back(name, std::move(m));
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  return push_back(std::to_string(items_.size()), std::move(module));
}

Sequential& Sequential::push_back(const std::string& name, std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, "Sequential::push_back: null module");
  register_module(name, module);
  items_.push_back(std::move(module));
  return *this;
}

Module& Sequential::operator[](size_t i) const {
  EMBER_CHECK(i < items_.size(), "Sequential: index ", i, " is out of range for ", items_.size(), " modules");
  return *items_[i];
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (size_t i = 0; i < items_.size(); ++i) {
    if (fusion_) {
      if (const size_t taken = detail::run_fused(items_, i, x)) {
        i += taken - 1;
        continue;
      }
    }
    x = (*items_[i])(x);
  }
  return x;
}

ModuleList& ModuleList::push_back(std::shared_ptr<Module> module) {
  EMBER_CHECK(module != nullptr, "ModuleList::push_back: null module");
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
  return *this;
}

Module& ModuleList::operator[](size_t i) const {
  EMBER_CHECK(i < items_.size(), "ModuleList: index ", i, " is out of range for ", items_.size(), " modules");
  return *items_[i];
}

}  // namespace ember::nn
