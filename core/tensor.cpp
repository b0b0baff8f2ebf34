// The tensor layer's definitions: TensorImpl, metadata and the autograd state a tensor carries.
// Nothing here records a node or runs an op (those members are defined in core/ops/ and
// core/autograd/), so this layer includes neither.
#include "core/tensor.h"

#include "core/autograd_meta.h"
#include "core/error.h"

namespace ember {

// ---------------------------------------------------------------- TensorImpl

TensorImpl::TensorImpl() = default;
TensorImpl::~TensorImpl() = default;

AutogradMeta& TensorImpl::meta() {
  if (!autograd) autograd = std::make_unique<AutogradMeta>();
  return *autograd;
}

int64_t TensorImpl::numel() const {
  return numel_of(shape);
}

void* TensorImpl::data() const {
  return static_cast<char*>(storage->ptr()) + offset * static_cast<int64_t>(itemsize(dtype));
}

#define EMBER_CHECK_DEFINED(what) EMBER_CHECK(impl_, what, ": called on an undefined tensor")

// ---------------------------------------------------------------- metadata

const Shape& Tensor::shape() const {
  EMBER_CHECK_DEFINED("shape");
  return impl_->shape;
}

int64_t Tensor::size(int64_t d) const {
  return shape()[wrap_dim(d, dim(), "size")];
}

const Shape& Tensor::strides() const {
  EMBER_CHECK_DEFINED("strides");
  return impl_->strides;
}

int64_t Tensor::stride(int64_t d) const {
  return strides()[wrap_dim(d, dim(), "stride")];
}

int64_t Tensor::offset() const {
  EMBER_CHECK_DEFINED("offset");
  return impl_->offset;
}

int64_t Tensor::dim() const {
  return static_cast<int64_t>(shape().size());
}

int64_t Tensor::numel() const {
  return numel_of(shape());
}

DType Tensor::dtype() const {
  EMBER_CHECK_DEFINED("dtype");
  return impl_->dtype;
}

Device Tensor::device() const {
  EMBER_CHECK_DEFINED("device");
  return impl_->storage->device;
}

const std::shared_ptr<Storage>& Tensor::storage() const {
  EMBER_CHECK_DEFINED("storage");
  return impl_->storage;
}

uint32_t Tensor::version() const {
  return storage()->version.load();
}

void Tensor::bump_version() const {
  storage()->version.fetch_add(1);
}

void* Tensor::raw_data() const {
  EMBER_CHECK_DEFINED("data");
  return impl_->data();
}

bool Tensor::is_contiguous() const {
  const Shape& sh = shape();
  const Shape& st = strides();
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sh.size()) - 1; d >= 0; --d) {
    if (sh[d] == 1) continue;
    if (st[d] != expected) return false;
    expected *= sh[d];
  }
  return true;
}

void Tensor::check_dtype(DType expected, const char* what) const {
  EMBER_CHECK(dtype() == expected, what, ": expected a tensor of dtype ", dtype_name(expected), " but got ",
              dtype_name(dtype()));
}

// ---------------------------------------------------------------- autograd accessors

bool Tensor::requires_grad() const {
  return impl_ && impl_->autograd && impl_->autograd->requires_grad;
}

Tensor& Tensor::requires_grad_(bool value) {
  EMBER_CHECK_DEFINED("requires_grad_");
  if (value) {
    EMBER_CHECK(is_floating(dtype()), "requires_grad_: only floating-point tensors can require gradients, got ",
                dtype_name(dtype()));
  } else {
    EMBER_CHECK(is_leaf(), "requires_grad_(false): only leaf tensors can stop requiring grad; use detach()");
  }
  impl_->meta().requires_grad = value;
  return *this;
}

bool Tensor::is_leaf() const {
  return !(impl_ && impl_->autograd && impl_->autograd->grad_fn);
}

Tensor Tensor::grad() const {
  if (!impl_ || !impl_->autograd) return {};
  return impl_->autograd->grad;
}

void Tensor::set_grad(const Tensor& g) const {
  EMBER_CHECK_DEFINED("set_grad");
  if (g.defined())
    EMBER_CHECK(g.shape() == shape(), "set_grad: gradient shape ", shape_str(g.shape()),
                " does not match the tensor's shape ", shape_str(shape()));
  impl_->meta().grad = g;
}

Tensor& Tensor::mutable_grad() const {
  EMBER_CHECK_DEFINED("mutable_grad");
  return impl_->meta().grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  if (!impl_ || !impl_->autograd) return nullptr;
  return impl_->autograd->grad_fn;
}

uint32_t Tensor::output_nr() const {
  return impl_ && impl_->autograd ? impl_->autograd->output_nr : 0;
}

Tensor Tensor::detach() const {
  EMBER_CHECK_DEFINED("detach");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor& Tensor::detach_() {
  EMBER_CHECK_DEFINED("detach_");
  if (impl_->autograd) {
    impl_->autograd->grad_fn.reset();
    impl_->autograd->requires_grad = false;
    impl_->autograd->output_nr = 0;
  }
  return *this;
}

bool Tensor::retains_grad() const {
  return impl_ && impl_->autograd && impl_->autograd->retains_grad;
}

}  // namespace ember
