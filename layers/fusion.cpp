#include "layers/fusion.h"

#include <typeinfo>

#include "layers/activation.h"
#include "layers/container.h"
#include "layers/conv.h"
#include "layers/functional.h"
#include "layers/pooling.h"

namespace ember::nn {

namespace {

// Exactly a module of type M without forward hooks (which would see tensors of another order, or
// miss one a fused op never makes), or null.
template <class M>
M* plain(const std::vector<std::shared_ptr<Module>>& items, size_t i) {
  if (i >= items.size() || !items[i]) return nullptr;
  const Module& ref = *items[i];
  return typeid(ref) == typeid(M) && !ref.has_forward_hooks() ? static_cast<M*>(items[i].get()) : nullptr;
}

enum class Kind { None, ConvPool, ConvReluPool, ReluPool };

// The fused run that starts at items[i], if any.
Kind match(const std::vector<std::shared_ptr<Module>>& items, size_t i) {
  if (plain<Conv2d>(items, i)) {
    const bool relu = plain<ReLU>(items, i + 1) && plain<MaxPool2d>(items, i + 2);
    if (plain<MaxPool2d>(items, relu ? i + 2 : i + 1)) return relu ? Kind::ConvReluPool : Kind::ConvPool;
  }
  if (plain<ReLU>(items, i) && plain<MaxPool2d>(items, i + 1)) return Kind::ReluPool;
  return Kind::None;
}

size_t length(Kind k) {
  return k == Kind::None ? 0 : k == Kind::ConvReluPool ? 3 : 2;
}

std::string child_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace

namespace detail {

size_t run_fused(const std::vector<std::shared_ptr<Module>>& items, size_t i, Tensor& x) {
  const Kind k = match(items, i);
  switch (k) {
    case Kind::ConvPool:
    case Kind::ConvReluPool: {
      // Conv2d then MaxPool2d, or Conv2d, ReLU, MaxPool2d (the ReLU moved after the pooling):
      // one op, conv2d_max_pool2d, which keeps the convolution's output in cache.
      Conv2d& conv = *plain<Conv2d>(items, i);
      MaxPool2d& pool = *plain<MaxPool2d>(items, i + length(k) - 1);
      x = F::conv2d_max_pool2d(x, conv.weight, conv.bias, conv.params(), pool.params());
      if (k == Kind::ConvReluPool) x = (*items[i + 1])(x);
      break;
    }
    case Kind::ReluPool:  // the pooling first
      x = (*items[i])((*items[i + 1])(x));
      break;
    case Kind::None:
      break;
  }
  return length(k);
}

}  // namespace detail

std::vector<FusedRun> fuse(Module& model) {
  std::vector<FusedRun> runs;
  for (auto& entry : model.named_modules()) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& prefix = entry.first;
    auto* seq = dynamic_cast<Sequential*>(entry.second);
    if (!seq) continue;
    seq->set_fusion(true);
    const auto& items = seq->items();
    const auto named = seq->named_children();
    auto name_of = [&](const Module* element) {
      for (const auto& [n, c] : named)
        if (c == element) return child_name(prefix, n);
      return child_name(prefix, "?");
    };
    for (size_t i = 0; i < items.size();) {
      const Kind k = match(items, i);
      if (k == Kind::None) {
        ++i;
        continue;
      }
      FusedRun run{.modules = {},
                   .as = k == Kind::ReluPool   ? "max_pool2d, relu"
                         : k == Kind::ConvPool ? "conv2d_max_pool2d"
                                               : "conv2d_max_pool2d, relu"};
      for (size_t j = i; j < i + length(k); ++j) run.modules.push_back(name_of(items[j].get()));
      runs.push_back(std::move(run));
      i += length(k);
    }
  }
  return runs;
}

void unfuse(Module& model) {
  for (Module* m : model.modules())
    if (auto* seq = dynamic_cast<Sequential*>(m)) seq->set_fusion(false);
}

}  // namespace ember::nn
