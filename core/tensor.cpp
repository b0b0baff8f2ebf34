#include "core/tensor.h"

#include <cstring>

#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/meta.h"
#include "core/autograd/node.h"
#include "core/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

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

// ---------------------------------------------------------------- helpers

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape st(shape.size());
  int64_t acc = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= std::max<int64_t>(shape[d], 1);
  }
  return st;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 / -1
  EMBER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim, " dims (expected ", -n,
              " <= dim < ", n, ")");
  return dim < 0 ? dim + n : dim;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << shape_str(s);
}

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

// ---------------------------------------------------------------- metadata

#define EMBER_CHECK_DEFINED(what) EMBER_CHECK(impl_, what, ": called on an undefined tensor")

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

double Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: expected a tensor with one element but got shape ", shape_str(shape()));
  Tensor c = to(Device::cpu(), DType::Float64);
  return *static_cast<const double*>(c.raw_data());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(Device::cpu(), dtype_of<T>()).contiguous();
  std::vector<T> v(static_cast<size_t>(c.numel()));
  if (!v.empty()) std::memcpy(static_cast<void*>(v.data()), c.raw_data(), v.size() * sizeof(T));
  return v;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
// std::vector<bool> is bit-packed: go through one byte per element.
template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  const std::vector<uint8_t> bytes = to(Device::cpu(), DType::Bool).to_vector<uint8_t>();
  return std::vector<bool>(bytes.begin(), bytes.end());
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

bool Tensor::retains_grad() const {
  return impl_ && impl_->autograd && impl_->autograd->retains_grad;
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
  EMBER_CHECK_DEFINED("backward");
  EMBER_CHECK(requires_grad(), "backward: the tensor does not require grad and has no grad_fn");
  if (!gradient.defined())
    EMBER_CHECK(numel() == 1, "backward: a gradient must be given for a non-scalar output of shape ",
                shape_str(shape()));
  autograd::backward({*this}, {gradient}, retain_graph);
}

// ---------------------------------------------------------------- views

namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->is_view = true;
  return Tensor(std::move(impl));
}

// Strides for viewing a tensor with (shape, strides) as new_shape without copying, or nullopt
// (the algorithm of PyTorch's computeStride: split/merge runs of contiguous dims).
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape) {
  Shape out(new_shape.size());
  if (numel_of(shape) == 0 || shape.empty()) return contiguous_strides(new_shape);
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_shape(Shape shape, int64_t numel, const char* op) {
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK(infer < 0, op, ": only one dimension can be -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ",
                numel);
    shape[infer] = numel / known;
  }
  EMBER_CHECK(numel_of(shape) == numel, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel);
  return shape;
}

// Records the backward of a view op: grads flow back through `fn`.
void record_view(const char* name, const Tensor& in, const Tensor& out, autograd::BackwardFn fn) {
  autograd::record(name, {in}, {out}, std::move(fn));
}

}  // namespace

Tensor Tensor::view(Shape new_shape) const {
  new_shape = infer_shape(std::move(new_shape), numel(), "view");
  auto st = view_strides(shape(), strides(), new_shape);
  EMBER_CHECK(st.has_value(), "view: shape ", shape_str(new_shape), " is not compatible with the input's size ",
              shape_str(shape()), " and strides ", shape_str(strides()), "; use reshape()");
  Tensor out = make_view(*this, new_shape, *st, offset());
  Shape in_shape = shape();
  record_view("ViewBackward", *this, out,
              [in_shape](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
                return {g[0].reshape(in_shape)};
              });
  return out;
}

Tensor Tensor::reshape(Shape new_shape) const {
  new_shape = infer_shape(std::move(new_shape), numel(), "reshape");
  if (view_strides(shape(), strides(), new_shape)) return view(new_shape);
  return contiguous().view(new_shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  EMBER_CHECK(s <= e, "flatten: start_dim ", start_dim, " must not come after end_dim ", end_dim);
  Shape ns;
  for (int64_t d = 0; d < s; ++d) ns.push_back(shape()[d]);
  int64_t m = 1;
  for (int64_t d = s; d <= e; ++d) m *= shape()[d];
  ns.push_back(m);
  for (int64_t d = e + 1; d < dim(); ++d) ns.push_back(shape()[d]);
  return reshape(ns);
}

Tensor Tensor::unflatten(int64_t d, Shape sizes) const {
  d = wrap_dim(d, dim(), "unflatten");
  sizes = infer_shape(std::move(sizes), shape()[d], "unflatten");
  Shape ns(shape().begin(), shape().begin() + d);
  ns.insert(ns.end(), sizes.begin(), sizes.end());
  ns.insert(ns.end(), shape().begin() + d + 1, shape().end());
  return reshape(ns);
}

Tensor Tensor::squeeze() const {
  Shape ns;
  for (int64_t s : shape())
    if (s != 1) ns.push_back(s);
  return reshape(ns);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape ns = shape();
  ns.erase(ns.begin() + d);
  return reshape(ns);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape ns = shape();
  ns.insert(ns.begin() + d, 1);
  return reshape(ns);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) return *this;
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  std::vector<int64_t> perm(static_cast<size_t>(dim()));
  for (int64_t i = 0; i < dim(); ++i) perm[i] = i;
  std::swap(perm[d0], perm[d1]);
  return permute(perm);
}

Tensor Tensor::permute(std::vector<int64_t> dims) const {
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(), " dims for a tensor with ",
              dim(), " dims");
  std::vector<bool> seen(dims.size(), false);
  Shape ns(dims.size()), nst(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    EMBER_CHECK(!seen[d], "permute: dim ", d, " appears twice");
    seen[d] = true;
    dims[i] = d;
    ns[i] = shape()[d];
    nst[i] = strides()[d];
  }
  Tensor out = make_view(*this, ns, nst, offset());
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inv[dims[i]] = static_cast<int64_t>(i);
  record_view("PermuteBackward", *this, out,
              [inv](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
                return {g[0].permute(inv)};
              });
  return out;
}

Tensor Tensor::t() const {
  EMBER_CHECK(dim() <= 2, "t: expected a tensor with at most 2 dims but got shape ", shape_str(shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape ns = shape(), nst = strides();
  ns[d] = (end - start + step - 1) / step;
  nst[d] = strides()[d] * step;
  Tensor out = make_view(*this, ns, nst, offset() + start * strides()[d]);
  Shape in_shape = shape();
  DType dt = dtype();
  Device dev = device();
  record_view("SliceBackward", *this, out,
              [in_shape, dt, dev, d, start, end, step](const std::vector<Tensor>& g,
                                                       const std::vector<bool>&) -> std::vector<Tensor> {
                Tensor gi = empty(in_shape, {dt, dev});
                gi.zero_();
                gi.slice(d, start, end, step).copy_(g[0]);
                return {gi};
              });
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  EMBER_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: range [", start, ", ", start + length,
              ") is out of bounds for dim ", d, " of size ", n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  EMBER_CHECK(dim() > 0, "select: cannot select from a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[d];
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  Shape ns = shape(), nst = strides();
  ns.erase(ns.begin() + d);
  nst.erase(nst.begin() + d);
  Tensor out = make_view(*this, ns, nst, offset() + index * strides()[d]);
  Shape in_shape = shape();
  DType dt = dtype();
  Device dev = device();
  record_view(
      "SelectBackward", *this, out,
      [in_shape, dt, dev, d, index](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
        Tensor gi = empty(in_shape, {dt, dev});
        gi.zero_();
        gi.select(d, index).copy_(g[0]);
        return {gi};
      });
  return out;
}

Tensor Tensor::expand(Shape target) const {
  EMBER_CHECK(static_cast<int64_t>(target.size()) >= dim(), "expand: target shape ", shape_str(target),
              " has fewer dims than the tensor's shape ", shape_str(shape()));
  const int64_t lead = static_cast<int64_t>(target.size()) - dim();
  Shape nst(target.size());
  for (int64_t i = static_cast<int64_t>(target.size()) - 1; i >= 0; --i) {
    int64_t j = i - lead;
    if (j < 0) {
      EMBER_CHECK(target[i] >= 0, "expand: size -1 is not allowed for a new leading dim in ", shape_str(target));
      nst[i] = 0;
      continue;
    }
    int64_t s = shape()[j];
    if (target[i] == -1) target[i] = s;
    if (s == target[i]) {
      nst[i] = strides()[j];
    } else {
      EMBER_CHECK(s == 1, "expand: the size ", s, " of dim ", j, " must match ", target[i], " or be 1 (shape ",
                  shape_str(shape()), " -> ", shape_str(target), ")");
      nst[i] = 0;
    }
  }
  Tensor out = make_view(*this, target, nst, offset());
  Shape in_shape = shape();
  record_view("ExpandBackward", *this, out,
              [in_shape](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
                return {sum_to(g[0], in_shape)};
              });
  return out;
}

Tensor Tensor::as_strided(Shape new_shape, Shape new_strides, int64_t new_offset) const {
  EMBER_CHECK(new_shape.size() == new_strides.size(), "as_strided: shape and strides differ in length");
  int64_t max_index = new_offset;
  for (size_t d = 0; d < new_shape.size(); ++d) {
    EMBER_CHECK(new_shape[d] >= 0 && new_strides[d] >= 0, "as_strided: negative size or stride");
    if (new_shape[d] == 0) max_index = -1;
    if (max_index >= 0) max_index += (new_shape[d] - 1) * new_strides[d];
  }
  EMBER_CHECK(max_index < static_cast<int64_t>(storage()->nbytes / itemsize()), "as_strided: view reaches element ",
              max_index, " beyond the storage's ", storage()->nbytes / itemsize(), " elements");
  return make_view(*this, std::move(new_shape), std::move(new_strides), new_offset);
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), options());
  copy_stub(device())(out, *this);
  autograd::record(
      "CloneBackward", {*this}, {out},
      [](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> { return {g[0]}; });
  return out;
}

Tensor Tensor::to(Device d) const {
  return to(d, dtype());
}
Tensor Tensor::to(DType t) const {
  return to(device(), t);
}

Tensor Tensor::to(Device d, DType t) const {
  if (d == device() && t == dtype()) return *this;
  Tensor out = empty(shape(), {t, d});
  {
    NoGradGuard ng;
    out.copy_(*this);
  }
  if (is_floating(t)) {
    Device src_dev = device();
    DType src_dt = dtype();
    autograd::record("ToBackward", {*this}, {out},
                     [src_dev, src_dt](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
                       return {g[0].to(src_dev, src_dt)};
                     });
  }
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  EMBER_CHECK_DEFINED("copy_");
  EMBER_CHECK(src.defined(), "copy_: the source tensor is undefined");
  Tensor s = src;
  if (s.shape() != shape()) {
    EMBER_CHECK(s.dim() <= dim(), "copy_: source shape ", shape_str(s.shape()), " cannot be broadcast to ",
                shape_str(shape()));
    NoGradGuard ng;
    s = s.expand(shape());
  }
  const bool track = GradMode::is_enabled() && (requires_grad() || src.requires_grad());
  if (track) autograd::check_inplace(*this, "copy_");
  Device worker = device().is_cuda() ? device() : s.device();
  copy_stub(worker)(*this, s);
  bump_version();
  if (track) {
    Shape src_shape = src.shape();
    Device src_dev = src.device();
    DType src_dt = src.dtype();
    autograd::record_inplace("CopyBackward", *this, {src},
                             [src_shape, src_dev, src_dt](const std::vector<Tensor>& g,
                                                          const std::vector<bool>& needs) -> std::vector<Tensor> {
                               std::vector<Tensor> r(2);
                               if (needs[1]) r[1] = sum_to(g[0], src_shape).to(src_dev, src_dt);
                               return r;  // the old value of self gets no gradient
                             });
  }
  return *this;
}

Tensor& Tensor::fill_(double value) {
  EMBER_CHECK_DEFINED("fill_");
  if (GradMode::is_enabled() && requires_grad()) {
    autograd::check_inplace(*this, "fill_");
    fill_stub(device())(*this, value);
    bump_version();
    autograd::record_inplace(
        "FillBackward", *this, {},
        [](const std::vector<Tensor>&, const std::vector<bool>&) -> std::vector<Tensor> { return {Tensor()}; });
    return *this;
  }
  fill_stub(device())(*this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::zero_() {
  return fill_(0.0);
}

}  // namespace ember
