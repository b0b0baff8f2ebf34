// Autograd state of one tensor, allocated only for tensors that take part in autograd. It is
// data the tensor carries (core/tensor.h owns it through TensorImpl), so it lives with the
// tensor layer; the graph and the engine that read and write it are in core/autograd/.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace ember {

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  // Leaves: the AccumulateGrad node of the current graph (weak: the graph owns it).
  std::weak_ptr<autograd::Node> grad_accumulator;
  std::vector<TensorHook> leaf_hooks;  // pre-hooks on a leaf's incoming gradient
  std::vector<PostAccumulateHook> post_accumulate_hooks;
  bool retains_grad = false;
};

}  // namespace ember
