// Tensor's members that reach the graph and the engine: backward, retain_grad and the gradient
// hooks (a non-leaf's hook hangs on its grad_fn). The state they touch is core/autograd_meta.h.
#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/autograd_meta.h"
#include "core/ops/elementwise.h"
#include "core/tensor.h"

namespace ember {

void Tensor::retain_grad() const {
  EMBER_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
  if (is_leaf() || impl_->autograd->retains_grad) return;
  impl_->autograd->retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  register_hook([weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      auto& m = self->meta();
      NoGradGuard ng;
      m.grad = m.grad.defined() ? m.grad + g : g.clone();
    }
    return Tensor();
  });
}

void Tensor::register_hook(TensorHook hook) const {
  EMBER_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that does not require grad");
  if (is_leaf()) {
    impl_->autograd->leaf_hooks.push_back(std::move(hook));
  } else {
    impl_->autograd->grad_fn->pre_hooks().emplace_back(output_nr(), std::move(hook));
  }
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  EMBER_CHECK(requires_grad() && is_leaf(),
              "register_post_accumulate_grad_hook: only leaf tensors that require grad accept this hook");
  impl_->autograd->post_accumulate_hooks.push_back(std::move(hook));
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  EMBER_CHECK(defined(), "backward: called on an undefined tensor");
  EMBER_CHECK(requires_grad(), "backward: the tensor does not require grad and has no grad_fn");
  if (!gradient.defined())
    EMBER_CHECK(numel() == 1, "backward: a gradient must be given for a non-scalar output of shape ",
                shape_str(shape()));
  autograd::backward({*this}, {gradient}, retain_graph);
}

}  // namespace ember
