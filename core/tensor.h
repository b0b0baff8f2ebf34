// The Tensor: a handle to shared storage plus shape, strides, offset, dtype and device, with the
// autograd state (requires_grad, grad, grad_fn, hooks) that define-by-run differentiation needs.
// Copying a Tensor copies the handle; views (reshape, transpose, slice, expand, ...) share the
// storage and its version counter, which is how an in-place change to a tensor saved for backward
// is detected.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace ember {

namespace autograd {
class Node;
}

struct Storage {
  DataPtr data;
  size_t nbytes = 0;
  Device device;
  // Bumped by every in-place write to any tensor that shares this storage.
  std::atomic<uint32_t> version{0};

  Storage(DataPtr d, size_t n, Device dev) : data(std::move(d)), nbytes(n), device(dev) {}
  void* ptr() const { return data.get(); }
};

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
};

struct AutogradMeta;
class Tensor;

using TensorHook = std::function<Tensor(const Tensor& grad)>;  // may return an undefined tensor
using PostAccumulateHook = std::function<void(const Tensor& leaf)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;
  DType dtype = DType::Float32;
  // Set on tensors made by a view op: in-place writes to them under autograd are refused when
  // history is involved, because the base tensor's history would not see them.
  bool is_view = false;
  std::unique_ptr<AutogradMeta> autograd;

  TensorImpl();
  ~TensorImpl();
  AutogradMeta& meta();  // created on first use
  int64_t numel() const;
  void* data() const;  // pointer to element 0 (storage base + offset)
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  // How many Tensor handles share this tensor's implementation (1: this one alone).
  long use_count() const { return impl_.use_count(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  const Shape& strides() const;
  int64_t stride(int64_t dim) const;
  int64_t offset() const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  size_t itemsize() const { return ember::itemsize(dtype()); }
  bool is_contiguous() const;
  bool is_floating_point() const { return is_floating(dtype()); }
  const std::shared_ptr<Storage>& storage() const;
  uint32_t version() const;
  void bump_version() const;
  TensorOptions options() const { return {dtype(), device(), false}; }

  void* raw_data() const;
  template <typename T>
  T* data_ptr() const {
    check_dtype(dtype_of<T>(), "data_ptr");
    return static_cast<T*>(raw_data());
  }

  // ---- values (core/ops/copy.cpp: they convert through to())
  double item() const;  // a one-element tensor's value, converted to double
  template <typename T>
  T item() const {
    return static_cast<T>(item());
  }
  template <typename T>
  std::vector<T> to_vector() const;  // all elements in row-major order, converted to T

  // ---- autograd
  bool requires_grad() const;
  Tensor& requires_grad_(bool value = true);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  Tensor& mutable_grad() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  uint32_t output_nr() const;
  Tensor detach() const;  // shares storage, no history
  Tensor& detach_();
  void retain_grad() const;
  bool retains_grad() const;
  // The hooks and backward reach the graph and the engine: core/autograd/tensor_methods.cpp.
  // Called with the gradient flowing into this tensor; may return a replacement.
  void register_hook(TensorHook hook) const;
  // Leaves only: called once per backward, after this leaf's .grad has been fully accumulated.
  void register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // ---- views (share storage; they record autograd nodes, so they are ops: core/ops/view.cpp)
  Tensor view(Shape shape) const;     // requires compatible strides
  Tensor reshape(Shape shape) const;  // view when possible, else a copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, Shape sizes) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor t() const;  // 2-D transpose
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(Shape shape) const;  // -1 keeps a size
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor as_strided(Shape shape, Shape strides, int64_t offset) const;  // no autograd

  // ---- copies and conversion (core/ops/copy.cpp)
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(Device d) const;
  Tensor to(DType t) const;
  Tensor to(Device d, DType t) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor& copy_(const Tensor& src);  // broadcasting, casting, any devices
  Tensor& fill_(double value);
  Tensor& zero_();

  // ---- math shorthands (core/ops/tensor_methods.cpp and beside their free functions)
  Tensor add(const Tensor& o, double alpha = 1.0) const;
  Tensor sub(const Tensor& o, double alpha = 1.0) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor& add_(const Tensor& o, double alpha = 1.0);
  Tensor& sub_(const Tensor& o, double alpha = 1.0);
  Tensor& mul_(const Tensor& o);
  Tensor& div_(const Tensor& o);
  Tensor& add_(double s);
  Tensor& mul_(double s);
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor pow(double e) const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor sum() const;
  Tensor sum(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor min() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;

  std::string str() const;  // PyTorch-style printing (core/ops/print.cpp)

  void check_dtype(DType expected, const char* what) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// std::vector<bool> is bit-packed, so it has its own conversion (one byte per element inside).
template <>
std::vector<bool> Tensor::to_vector<bool>() const;

// Where a new tensor's memory comes from (core/tensor_factories.cpp); every op that makes an
// output calls this.
Tensor empty(Shape shape, TensorOptions opts = {});
Tensor empty_strided(Shape shape, Shape strides, TensorOptions opts = {});
// Wraps existing memory without copying; the deleter (if any) runs when the last view dies.
Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter = nullptr,
                 Device device = Device::cpu());

}  // namespace ember
