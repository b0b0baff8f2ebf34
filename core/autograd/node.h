// The autograd graph. Every differentiable op that sees an input requiring grad records one
// Node: a backward function from the gradients of its outputs to the gradients of its inputs,
// plus one Edge per input to the node that produced that input (or to the input's
// AccumulateGrad node when it is a leaf). Saved tensors are held as SavedTensor, a storage-sharing
// alias without history (so the graph has no reference cycles) that remembers the version it saw.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// What the engine needs to know about each output of a node: to make zeros for an output that
// received no gradient, and to check that a backward function returned the right shapes.
struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float32;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads has one entry per output (never undefined: the engine fills zeros); the result has
  // one entry per next edge (undefined where no gradient flows).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_variables() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  const std::vector<TensorMeta>& input_meta() const { return input_meta_; }  // per output
  std::vector<TensorMeta>& mutable_input_meta() { return input_meta_; }
  uint64_t sequence_nr() const { return sequence_nr_; }

  // Hooks on the gradient flowing into output `nr` (registered through Tensor::register_hook on
  // a non-leaf), run before apply().
  std::vector<std::pair<uint32_t, TensorHook>>& pre_hooks() { return pre_hooks_; }

 private:
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> input_meta_;
  std::vector<std::pair<uint32_t, TensorHook>> pre_hooks_;
  uint64_t sequence_nr_;
};

// Accumulates into a leaf's .grad and then runs the leaf's post-accumulate hooks: the engine
// runs it once per backward, after all gradients for that leaf have been summed.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// A tensor saved for backward: same storage, no history; get() fails with a clear error if the
// tensor was modified in place after it was saved, or if the graph was already freed.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor get() const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint32_t saved_version_ = 0;
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads, const std::vector<bool>& needs)>;

// A node whose backward is a function (usually a lambda capturing SavedTensors).
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return name_; }
  void release_variables() override { fn_ = nullptr; }

 private:
  std::string name_;
  BackwardFn fn_;
};

// True when grad mode is on and any of the tensors requires grad.
bool any_requires_grad(const std::vector<Tensor>& inputs);

// The edge that gradients for `t` flow along (its grad_fn, or its leaf accumulator).
Edge gradient_edge(const Tensor& t);

// Records `fn` as the backward of an op mapping `inputs` to `outputs` (differentiable outputs
// only; integer outputs such as argmax indices are left out). Does nothing when no input requires
// grad or grad mode is off. The function receives one gradient per output and returns one per
// input (undefined where needs[i] is false).
void record(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, BackwardFn fn);

// For an in-place op on `self`: records `fn` (inputs as above, self's old value as inputs[0]'s
// history) and makes `self` the node's output.
void record_inplace(const char* name, Tensor& self, const std::vector<Tensor>& other_inputs, BackwardFn fn);

// Checks that an in-place op may modify `t` with autograd on (not a leaf requiring grad, not a
// view of a tensor requiring grad); names `op` otherwise.
void check_inplace(const Tensor& t, const char* op);

}  // namespace ember::autograd
