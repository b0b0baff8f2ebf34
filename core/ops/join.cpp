// Joining, splitting and padding: cat, stack, split, chunk, pad. These move data through the copy
// and fill kernels, so they need no kernels of their own and work on every device.
#include <numeric>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"

namespace ember {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

// PyTorch's cat skips 1-D empty tensors whatever the other shapes (a common "start from empty"
// idiom), so do we.
bool skippable(const Tensor& t) {
  return t.dim() == 1 && t.numel() == 0;
}

void check_list(const std::vector<Tensor>& tensors, const char* op) {
  EMBER_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.defined(), op, ": tensor ", i, " is undefined");
    EMBER_CHECK(t.dtype() == tensors[0].dtype(), op, ": tensor ", i, " has dtype ", dtype_name(t.dtype()),
                " but tensor 0 has dtype ", dtype_name(tensors[0].dtype()), " (all tensors must share a dtype)");
    EMBER_CHECK(t.device() == tensors[0].device(), op, ": tensor ", i, " is on ", t.device(), " but tensor 0 is on ",
                tensors[0].device());
  }
}

// Views of `a` along dim with the given sizes, recorded as one node whose backward concatenates
// the output gradients (instead of one zero-padded gradient per piece).
std::vector<Tensor> split_views(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  std::vector<Tensor> outs;
  outs.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape shape = a.shape();
    shape[dim] = s;
    outs.push_back(a.as_strided(shape, a.strides(), a.offset() + (s == 0 ? 0 : start * a.stride(dim))));
    start += s;
  }
  autograd::record("SplitBackward", {a}, outs, [dim](const Grads& g, const Needs&) -> Grads { return {cat(g, dim)}; });
  return outs;
}

int64_t split_dim(const Tensor& a, int64_t dim, const char* op) {
  EMBER_CHECK(a.defined(), op, ": undefined tensor argument");
  EMBER_CHECK(a.dim() >= 1, op, ": cannot split a 0-dim tensor");
  return wrap_dim(dim, a.dim(), op);
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list(tensors, "cat");
  size_t ref = 0;
  while (ref < tensors.size() && skippable(tensors[ref])) ++ref;
  if (ref == tensors.size()) ref = 0;
  const Tensor& r = tensors[ref];
  for (size_t i = 0; i < tensors.size(); ++i)
    EMBER_CHECK(tensors[i].dim() > 0, "cat: tensor ", i, " is 0-dim; only tensors with dims can be concatenated");
  dim = wrap_dim(dim, r.dim(), "cat");
  Shape shape = r.shape();
  shape[dim] = 0;
  std::vector<int64_t> starts(tensors.size(), -1);  // -1: skipped
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (i != ref && skippable(t)) continue;
    EMBER_CHECK(t.dim() == r.dim(), "cat: tensor ", i, " has shape ", shape_str(t.shape()), " but tensor ", ref,
                " has shape ", shape_str(r.shape()), " (different numbers of dims)");
    for (int64_t d = 0; d < r.dim(); ++d)
      EMBER_CHECK(d == dim || t.size(d) == r.size(d), "cat: tensor ", i, " has shape ", shape_str(t.shape()),
                  " but tensor ", ref, " has shape ", shape_str(r.shape()), "; sizes must match except in dim ", dim);
    starts[i] = shape[dim];
    shape[dim] += t.size(dim);
  }
  Tensor out = empty(shape, r.options());
  {
    NoGradGuard ng;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (starts[i] >= 0 && tensors[i].numel() > 0) out.narrow(dim, starts[i], tensors[i].size(dim)).copy_(tensors[i]);
  }
  if (autograd::any_requires_grad(tensors)) {
    std::vector<Shape> shapes;
    for (const Tensor& t : tensors) shapes.push_back(t.shape());
    autograd::record("CatBackward", tensors, {out}, [dim, starts, shapes](const Grads& g, const Needs& need) -> Grads {
      Grads r(starts.size());
      for (size_t i = 0; i < starts.size(); ++i) {
        if (!need[i]) continue;
        r[i] = starts[i] < 0 ? zeros(shapes[i], g[0].options()) : g[0].narrow(dim, starts[i], shapes[i][dim]);
      }
      return r;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_list(tensors, "stack");
  const Tensor& r = tensors[0];
  dim = wrap_dim(dim, r.dim() + 1, "stack");
  for (size_t i = 1; i < tensors.size(); ++i)
    EMBER_CHECK(tensors[i].shape() == r.shape(), "stack: tensor ", i, " has shape ", shape_str(tensors[i].shape()),
                " but tensor 0 has shape ", shape_str(r.shape()), " (all must match)");
  Shape shape = r.shape();
  shape.insert(shape.begin() + dim, static_cast<int64_t>(tensors.size()));
  Tensor out = empty(shape, r.options());
  if (out.numel() > 0) {
    NoGradGuard ng;
    for (size_t i = 0; i < tensors.size(); ++i) out.select(dim, static_cast<int64_t>(i)).copy_(tensors[i]);
  }
  autograd::record("StackBackward", tensors, {out}, [dim](const Grads& g, const Needs& need) -> Grads {
    Grads r(need.size());
    for (size_t i = 0; i < need.size(); ++i)
      if (need[i]) r[i] = g[0].select(dim, static_cast<int64_t>(i));
    return r;
  });
  return out;
}

std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim) {
  dim = split_dim(a, dim, "split");
  const int64_t n = a.size(dim);
  EMBER_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ", split_size,
              " for dim ", dim, " of size ", n);
  std::vector<int64_t> sizes;
  if (n == 0) {
    sizes.push_back(0);
  } else {
    for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  }
  return split_views(a, sizes, dim);
}

std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = split_dim(a, dim, "split");
  EMBER_CHECK(!sizes.empty(), "split: expected at least one size");
  for (int64_t s : sizes) EMBER_CHECK(s >= 0, "split: sizes must be non-negative, got ", s);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  EMBER_CHECK(total == a.size(dim), "split: sizes ", shape_str(sizes), " sum to ", total, " but dim ", dim,
              " has size ", a.size(dim));
  return split_views(a, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  dim = split_dim(a, dim, "chunk");
  EMBER_CHECK(chunks > 0, "chunk: the number of chunks must be positive, got ", chunks);
  const int64_t n = a.size(dim);
  // An empty dim still yields `chunks` (empty) pieces, as in PyTorch.
  if (n == 0) return split_views(a, std::vector<int64_t>(static_cast<size_t>(chunks), 0), dim);
  return split(a, (n + chunks - 1) / chunks, dim);
}

namespace {

// One padded dim: the dim, the pads before and after it, and the input size.
struct PadDim {
  int64_t dim, before, after, size;
};

// Reflection about the edge elements, which are not repeated ([2 1 | 0 1 2 3 | 2 1]), written as
// slab copies inside the output, innermost padded dim first: each dim's border is copied from
// slices that already hold the inner dims' borders, which fills the corners too. Every output
// element is written once, and the backward is the same copies reversed as additions.
Tensor reflect_pad(const Tensor& a, const std::vector<PadDim>& pd) {
  for (const PadDim& p : pd) {
    EMBER_CHECK(p.before >= 0 && p.after >= 0, "pad: reflect padding must be non-negative, got (", p.before, ", ",
                p.after, ") for dim ", p.dim);
    EMBER_CHECK(p.before < p.size && p.after < p.size, "pad: reflect padding (", p.before, ", ", p.after,
                ") must be smaller than the size ", p.size, " of dim ", p.dim);
  }
  Shape shape = a.shape();
  for (const PadDim& p : pd) shape[p.dim] += p.before + p.after;
  auto interior = [pd](Tensor t, size_t from) {
    for (size_t q = from; q < pd.size(); ++q) t = t.narrow(pd[q].dim, pd[q].before, pd[q].size);
    return t;
  };
  // Calls f(dst_slice, src_slice) for each border slice of padded dim q, in a view whose outer
  // padded dims are narrowed to their interiors (their borders are not written yet).
  auto for_each_copy = [pd, interior](const Tensor& t, size_t q, const auto& f) {
    const PadDim& p = pd[q];
    Tensor v = interior(t, q + 1);
    for (int64_t i = 1; i <= p.before; ++i) f(v.select(p.dim, p.before - i), v.select(p.dim, p.before + i));
    const int64_t last = p.before + p.size - 1;
    for (int64_t i = 1; i <= p.after; ++i) f(v.select(p.dim, last + i), v.select(p.dim, last - i));
  };
  Tensor out = empty(shape, a.options());
  if (out.numel() > 0) {
    NoGradGuard ng;
    interior(out, 0).copy_(a);
    for (size_t q = 0; q < pd.size(); ++q) for_each_copy(out, q, [](Tensor dst, const Tensor& src) { dst.copy_(src); });
  }
  if (autograd::any_requires_grad({a})) {
    autograd::record("ReflectPadBackward", {a}, {out},
                     [pd, interior, for_each_copy](const Grads& g, const Needs&) -> Grads {
                       Tensor acc = g[0].clone();
                       for (size_t q = pd.size(); q-- > 0;)
                         for_each_copy(acc, q, [](const Tensor& dst, Tensor src) { src.add_(dst); });
                       return {interior(acc, 0)};
                     });
  }
  return out;
}

// Constant padding; negative pads crop. Only the border is filled, so each output element is
// written once.
Tensor constant_pad(const Tensor& a, const std::vector<PadDim>& pd, double value) {
  Shape shape = a.shape();
  // The part of the input that survives and where it lands in the output.
  std::vector<std::array<int64_t, 4>> region;  // dim, input start, output start, length
  bool empty_region = a.numel() == 0, cropped = false;
  for (const PadDim& p : pd) {
    EMBER_CHECK(p.size + p.before + p.after >= 0, "pad: padding (", p.before, ", ", p.after, ") would make dim ", p.dim,
                " of size ", p.size, " negative");
    shape[p.dim] = p.size + p.before + p.after;
    const int64_t len = p.size - std::max<int64_t>(0, -p.before) - std::max<int64_t>(0, -p.after);
    if (len <= 0) empty_region = true;
    if (p.before < 0 || p.after < 0) cropped = true;
    region.push_back({p.dim, std::max<int64_t>(0, -p.before), std::max<int64_t>(0, p.before), len});
  }
  auto narrow_all = [region](Tensor t, bool input_side) {
    for (const auto& r : region) t = t.narrow(r[0], r[input_side ? 1 : 2], r[3]);
    return t;
  };
  Tensor out = empty(shape, a.options());
  {
    NoGradGuard ng;
    if (empty_region) {
      out.fill_(value);
    } else {
      narrow_all(out, false).copy_(narrow_all(a, true));
      for (const auto& r : region) {
        const int64_t tail = out.size(r[0]) - r[2] - r[3];
        if (r[2] > 0) out.narrow(r[0], 0, r[2]).fill_(value);
        if (tail > 0) out.narrow(r[0], r[2] + r[3], tail).fill_(value);
      }
    }
  }
  if (autograd::any_requires_grad({a})) {
    Shape in_shape = a.shape();
    autograd::record("ConstantPadBackward", {a}, {out},
                     [narrow_all, empty_region, cropped, in_shape](const Grads& g, const Needs&) -> Grads {
                       if (empty_region) return {zeros(in_shape, g[0].options())};
                       if (!cropped) return {narrow_all(g[0], false)};
                       Tensor r = zeros(in_shape, g[0].options());
                       narrow_all(r, true).copy_(narrow_all(g[0], false));
                       return {r};
                     });
  }
  return out;
}

}  // namespace

Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, PadMode mode, double value) {
  EMBER_CHECK(a.defined(), "pad: undefined tensor argument");
  EMBER_CHECK(pads.size() % 2 == 0, "pad: pads must come in (before, after) pairs, got ", pads.size(), " values");
  const int64_t np = static_cast<int64_t>(pads.size() / 2), nd = a.dim();
  EMBER_CHECK(np <= nd, "pad: ", np, " padded dims requested but the tensor has shape ", shape_str(a.shape()));
  std::vector<PadDim> pd;
  for (int64_t p = 0; p < np; ++p) {
    const int64_t d = nd - 1 - p;
    pd.push_back({d, pads[2 * p], pads[2 * p + 1], a.size(d)});
  }
  return mode == PadMode::Reflect ? reflect_pad(a, pd) : constant_pad(a, pd, value);
}

}  // namespace ember
