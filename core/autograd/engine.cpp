#include "core/autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/autograd_meta.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"

namespace ember::autograd {

namespace {

struct NodeState {
  int dependencies = 0;
  std::vector<Tensor> buffer;
};

struct CompareSeq {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Sums the gradients that reach one input. The first one is usually a fresh tensor that nothing
// else holds (a backward function's output): then the next is added into it in place, which
// saves an allocation and a pass over memory (as PyTorch's InputBuffer does). When anything else
// may see it (another handle, a view of its storage, an expanded or strided layout), the sum is
// taken out of place.
void accumulate(std::vector<Tensor>& buffer, uint32_t nr, Tensor g) {
  Tensor& b = buffer[nr];
  if (!b.defined()) {
    b = std::move(g);
    return;
  }
  const bool exclusive = b.use_count() == 1 && b.storage().use_count() == 1 && b.is_contiguous() &&
                         !b.requires_grad() && b.shape() == g.shape() && b.dtype() == g.dtype() &&
                         b.device() == g.device() && b.impl() != g.impl() && b.dtype() != DType::Float16 &&
                         b.dtype() != DType::BFloat16;  // 16-bit sums run out of place, in float32
  if (exclusive) {
    b.add_(g);
  } else {
    b = b + g;
  }
}

void check_grad(const Tensor& g, const Edge& e, const Node& producer) {
  const TensorMeta& m = e.node->input_meta()[e.input_nr];
  EMBER_CHECK(g.shape() == m.shape, "autograd: ", producer.name(), " produced a gradient of shape ",
              shape_str(g.shape()), " for an input of shape ", shape_str(m.shape));
}

// Runs the graph behind `roots`. With `capture` set, gradients arriving at those edges are stored
// there instead of flowing on into leaves (.grad is left untouched).
void run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads, bool retain_graph,
         std::vector<std::pair<Edge, Tensor>>* capture) {
  NoGradGuard no_grad;  // backward functions do not build a graph themselves
  // Gradients keep the forward's dtypes: a backward function's ops are not autocast's to recast.
  detail::AutocastSuspend no_autocast;
  std::unordered_map<Node*, NodeState> state;
  std::vector<std::shared_ptr<Node>> keep_alive;

  // Count dependencies over the reachable graph.
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const auto& e : roots)
    if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& e : n->next_edges()) {
      if (!e.valid()) continue;
      state[e.node.get()].dependencies++;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  auto buffer_of = [&](Node* n) -> std::vector<Tensor>& {
    auto& b = state[n].buffer;
    if (b.empty()) b.resize(n->input_meta().size());
    return b;
  };

  std::priority_queue<Node*, std::vector<Node*>, CompareSeq> ready;
  std::unordered_set<Node*> queued;
  for (size_t i = 0; i < roots.size(); ++i) {
    accumulate(buffer_of(roots[i].node.get()), roots[i].input_nr, root_grads[i]);
  }
  for (const auto& e : roots)
    if (state[e.node.get()].dependencies == 0 && queued.insert(e.node.get()).second) ready.push(e.node.get());

  auto captured = [&](Node* n, std::vector<Tensor>& buf) {
    if (!capture) return;
    for (auto& [edge, out] : *capture)
      if (edge.node.get() == n && buf[edge.input_nr].defined())
        out = out.defined() ? out + buf[edge.input_nr] : buf[edge.input_nr];
  };

  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffer_of(n));
    state[n].buffer.clear();
    captured(n, grads);
    std::vector<Tensor> outs;
    bool any = false;
    for (const auto& g : grads) any = any || g.defined();
    const bool is_leaf_acc = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (any && !(capture && is_leaf_acc)) {
      for (auto& [nr, hook] : n->pre_hooks()) {
        if (!grads[nr].defined()) continue;
        Tensor r = hook(grads[nr]);
        if (r.defined()) grads[nr] = r;
      }
      for (size_t i = 0; i < grads.size(); ++i) {
        if (grads[i].defined()) continue;
        const TensorMeta& m = n->input_meta()[i];
        grads[i] = zeros(m.shape, {m.dtype, m.device});
      }
      outs = n->apply(std::move(grads));
      if (!retain_graph) n->release_variables();
    }
    const auto& edges = n->next_edges();
    for (size_t j = 0; j < edges.size(); ++j) {
      const Edge& e = edges[j];
      if (!e.valid()) continue;
      if (j < outs.size() && outs[j].defined()) {
        check_grad(outs[j], e, *n);
        accumulate(buffer_of(e.node.get()), e.input_nr, std::move(outs[j]));
      }
      if (--state[e.node.get()].dependencies == 0 && queued.insert(e.node.get()).second) ready.push(e.node.get());
    }
  }
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph) {
  EMBER_CHECK(roots.size() == grad_roots.size(), "backward: ", roots.size(), " tensors but ", grad_roots.size(),
              " gradients");
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    EMBER_CHECK(r.requires_grad(), "backward: tensor ", i, " does not require grad");
    Tensor g = grad_roots[i];
    if (!g.defined()) {
      EMBER_CHECK(r.numel() == 1, "backward: a gradient must be given for the non-scalar tensor ", i, " of shape ",
                  shape_str(r.shape()));
      g = ones(r.shape(), {r.dtype(), r.device()});
    }
    EMBER_CHECK(g.shape() == r.shape(), "backward: gradient ", i, " has shape ", shape_str(g.shape()),
                " but the tensor has shape ", shape_str(r.shape()));
    edges.push_back(gradient_edge(r));
    grads.push_back(g.detach());
  }
  run(edges, std::move(grads), retain_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused) {
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& r = outputs[i];
    EMBER_CHECK(r.requires_grad(), "grad: output ", i, " does not require grad");
    Tensor g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    if (!g.defined()) {
      EMBER_CHECK(r.numel() == 1, "grad: grad_outputs must be given for the non-scalar output ", i);
      g = ones(r.shape(), {r.dtype(), r.device()});
    }
    edges.push_back(gradient_edge(r));
    grads.push_back(g.detach());
  }
  std::vector<std::pair<Edge, Tensor>> capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].requires_grad(), "grad: input ", i, " does not require grad");
    capture.emplace_back(gradient_edge(inputs[i]), Tensor());
  }
  run(edges, std::move(grads), retain_graph, &capture);
  std::vector<Tensor> result;
  for (size_t i = 0; i < capture.size(); ++i) {
    EMBER_CHECK(allow_unused || capture[i].second.defined(), "grad: input ", i,
                " was not used to compute the outputs (pass allow_unused=true)");
    result.push_back(capture[i].second);
  }
  return result;
}

}  // namespace ember::autograd
