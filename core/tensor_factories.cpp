// Where a new tensor's memory comes from: the device's allocator, or memory the caller owns.
#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ember {

static void check_shape(const Shape& shape, const char* op) {
  for (int64_t s : shape) EMBER_CHECK(s >= 0, op, ": negative size in shape ", shape_str(shape));
}

Tensor empty(Shape shape, TensorOptions opts) {
  check_shape(shape, "empty");
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = static_cast<size_t>(numel_of(shape)) * itemsize(opts.dtype);
  impl->storage = std::make_shared<Storage>(get_allocator(opts.device)->allocate(nbytes), nbytes, opts.device);
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = opts.dtype;
  Tensor t(std::move(impl));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor empty_strided(Shape shape, Shape strides, TensorOptions opts) {
  check_shape(shape, "empty_strided");
  EMBER_CHECK(shape.size() == strides.size(), "empty_strided: shape ", shape_str(shape), " and strides ",
              shape_str(strides), " differ in length");
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) extent = 0;
    if (extent) extent += (shape[d] - 1) * strides[d];
  }
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = static_cast<size_t>(extent) * itemsize(opts.dtype);
  impl->storage = std::make_shared<Storage>(get_allocator(opts.device)->allocate(nbytes), nbytes, opts.device);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = opts.dtype;
  Tensor t(std::move(impl));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter, Device device) {
  check_shape(shape, "from_blob");
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = static_cast<size_t>(numel_of(shape)) * itemsize(dtype);
  DataPtr dp(
      data, deleter ? std::move(deleter) : [](void*) {});
  impl->storage = std::make_shared<Storage>(std::move(dp), nbytes, device);
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace ember
