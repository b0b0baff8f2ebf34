// Runs backward: from the roots' gradient functions, counts dependencies, then executes nodes
// in an order where each node runs only after every node that feeds it a gradient (ties broken
// by newest-first, so gradients of late layers become ready first, as the data-parallel reducer
// wants). Gradients arriving at the same input are summed before the node runs.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph);

// Gradients of `outputs` with respect to `inputs` without touching .grad (used by gradcheck).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace ember::autograd
