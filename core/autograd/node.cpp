#include "core/autograd/node.h"

#include <atomic>

#include "core/autograd/grad_mode.h"
#include "core/autograd_meta.h"
#include "core/ops/elementwise.h"

namespace ember::autograd {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node() : sequence_nr_(g_next_sequence_nr.fetch_add(1)) {}

// ------------------------------------------------------------ AccumulateGrad

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {
  mutable_input_meta().push_back({leaf_->shape, leaf_->dtype, leaf_->storage->device});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  AutogradMeta& m = leaf_->meta();
  for (auto& hook : m.leaf_hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  if (!m.grad.defined()) {
    // Own the memory: the incoming gradient may alias a buffer the graph still uses.
    m.grad = g.is_contiguous() && g.storage().use_count() == 1 ? g.detach() : g.detach().clone();
  } else {
    NoGradGuard ng;
    m.grad.add_(g);
  }
  Tensor leaf(leaf_);
  for (auto& hook : m.post_accumulate_hooks) hook(leaf);
  return {};
}

// ------------------------------------------------------------ SavedTensor

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  data_ = t.detach();
  saved_version_ = t.version();
}

Tensor SavedTensor::get() const {
  if (!data_.defined()) return data_;
  EMBER_CHECK(data_.version() == saved_version_,
              "autograd: a tensor saved for backward was modified by an in-place operation (version ", saved_version_,
              " when saved, ", data_.version(), " now); use an out-of-place operation or clone() the tensor first");
  return data_;
}

// ------------------------------------------------------------ FunctionNode

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  EMBER_CHECK(fn_, "autograd: trying to backward through ", name_,
              " a second time, after its saved tensors were freed; pass retain_graph=true to the first backward()");
  std::vector<bool> needs(next_edges().size());
  for (size_t i = 0; i < needs.size(); ++i) needs[i] = next_edges()[i].valid();
  std::vector<Tensor> out = fn_(grads, needs);
  EMBER_CHECK(out.size() == needs.size(), "autograd: ", name_, " returned ", out.size(), " gradients for ",
              needs.size(), " inputs");
  return out;
}

// ------------------------------------------------------------ recording

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl* impl = t.impl();
  AutogradMeta& m = impl->meta();
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

static void set_history(const Tensor& out, const std::shared_ptr<Node>& node, uint32_t nr) {
  AutogradMeta& m = out.impl()->meta();
  m.requires_grad = true;
  m.grad_fn = node;
  m.output_nr = nr;
}

void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn) {
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  for (const auto& in : inputs) node->mutable_next_edges().push_back(gradient_edge(in));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->mutable_input_meta().push_back({out.shape(), out.dtype(), out.device()});
    set_history(out, node, static_cast<uint32_t>(i));
  }
}

void check_inplace(const Tensor& t, const char* op) {
  if (!GradMode::is_enabled()) return;
  EMBER_CHECK(!(t.is_leaf() && t.requires_grad()), op,
              ": a leaf tensor that requires grad is used in an in-place operation; wrap it in NoGradGuard "
              "(for parameter updates) or use an out-of-place operation");
  EMBER_CHECK(!t.impl()->is_view, op,
              ": in-place operation on a view while autograd is recording is not supported (its base tensor's "
              "history would not see the change); use an out-of-place operation or clone() first");
}

void record_inplace(const char* name, Tensor& self, const std::vector<Tensor>& other_inputs, BackwardFn fn) {
  std::vector<Tensor> inputs;
  inputs.reserve(other_inputs.size() + 1);
  inputs.push_back(self);
  inputs.insert(inputs.end(), other_inputs.begin(), other_inputs.end());
  if (!any_requires_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  for (const auto& in : inputs) node->mutable_next_edges().push_back(gradient_edge(in));
  node->mutable_input_meta().push_back({self.shape(), self.dtype(), self.device()});
  set_history(self, node, 0);
}

}  // namespace ember::autograd
