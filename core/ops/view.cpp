// The view ops, Tensor members that share storage (reshape, transpose, slice, expand, ...). Each
// records an autograd node whose backward maps the gradient back to the input's shape, which is
// why they are ops and not part of the tensor layer.
#include <algorithm>
#include <optional>

#include "core/autograd/node.h"
#include "core/ops/reduce.h"
#include "core/tensor.h"

namespace ember {

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

}  // namespace ember
