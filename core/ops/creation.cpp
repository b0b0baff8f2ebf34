#include "core/ops/creation.h"

#include <cmath>
#include <numeric>

#include "core/autograd/grad_mode.h"
#include "core/philox.h"
#include "core/random.h"

namespace ember {

Tensor zeros(Shape shape, TensorOptions opts) {
  return full(std::move(shape), 0.0, opts);
}
Tensor ones(Shape shape, TensorOptions opts) {
  return full(std::move(shape), 1.0, opts);
}

Tensor full(Shape shape, double value, TensorOptions opts) {
  const bool rg = opts.requires_grad;
  opts.requires_grad = false;
  Tensor t = empty(std::move(shape), opts);
  t.fill_(value);
  if (rg) t.requires_grad_(true);
  return t;
}

Tensor empty_like(const Tensor& t) {
  return empty(t.shape(), t.options());
}
Tensor zeros_like(const Tensor& t) {
  return zeros(t.shape(), t.options());
}
Tensor ones_like(const Tensor& t) {
  return ones(t.shape(), t.options());
}
Tensor full_like(const Tensor& t, double value) {
  return full(t.shape(), value, t.options());
}
Tensor scalar_tensor(double value, TensorOptions opts) {
  return full({}, value, opts);
}

Tensor arange(double end, TensorOptions opts) {
  return arange(0.0, end, 1.0, opts);
}

Tensor arange(double start, double end, double step, TensorOptions opts) {
  EMBER_CHECK(step != 0.0, "arange: step must be nonzero");
  EMBER_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start and end must be finite");
  EMBER_CHECK((end - start) / step >= 0, "arange: the range [", start, ", ", end,
              ") is empty or inconsistent with step ", step);
  const int64_t n = static_cast<int64_t>(std::ceil((end - start) / step));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return from_vector(v, {n}, opts);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  EMBER_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
  std::vector<double> v(static_cast<size_t>(steps));
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Fill symmetrically from both ends, as PyTorch does, so the last value is exactly `end`.
  for (int64_t i = 0; i < steps; ++i)
    v[i] = i < steps / 2 ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  return from_vector(v, {steps}, opts);
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, TensorOptions opts) {
  const int64_t m = m_opt.value_or(n);
  EMBER_CHECK(n >= 0 && m >= 0, "eye: sizes must be non-negative, got ", n, " x ", m);
  std::vector<double> v(static_cast<size_t>(n * m), 0.0);
  for (int64_t i = 0; i < std::min(n, m); ++i) v[i * m + i] = 1.0;
  return from_vector(v, {n, m}, opts);
}

// ------------------------------------------------------------ random

namespace {

Tensor& fill_random(Tensor& t, RandomParams p, Generator* gen, const Tensor& prob = Tensor()) {
  Generator& g = gen ? *gen : default_generator();
  const int64_t n = t.numel();
  p.seed = g.seed();
  p.offset = g.reserve(random_blocks(p.kind, n));
  if (t.is_contiguous()) {
    random_stub(t.device())(t, p, prob);
  } else {
    Tensor tmp = empty(t.shape(), t.options());
    random_stub(t.device())(tmp, p, prob);
    NoGradGuard ng;
    t.copy_(tmp);
  }
  t.bump_version();
  return t;
}

Tensor make_random(Shape shape, TensorOptions opts, RandomParams p, Generator* gen) {
  const bool rg = opts.requires_grad;
  opts.requires_grad = false;
  Tensor t = empty(std::move(shape), opts);
  fill_random(t, p, gen);
  if (rg) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor rand(Shape shape, TensorOptions opts, Generator* gen) {
  EMBER_CHECK(is_floating(opts.dtype), "rand: dtype must be floating point, got ", dtype_name(opts.dtype));
  return make_random(std::move(shape), opts, {RandomKind::Uniform, 0.0, 1.0}, gen);
}

Tensor randn(Shape shape, TensorOptions opts, Generator* gen) {
  EMBER_CHECK(is_floating(opts.dtype), "randn: dtype must be floating point, got ", dtype_name(opts.dtype));
  return make_random(std::move(shape), opts, {RandomKind::Normal, 0.0, 1.0}, gen);
}

Tensor randint(int64_t low, int64_t high, Shape shape, TensorOptions opts, Generator* gen) {
  EMBER_CHECK(high > low, "randint: high (", high, ") must be greater than low (", low, ")");
  return make_random(std::move(shape), opts, {RandomKind::RandInt, static_cast<double>(low), static_cast<double>(high)},
                     gen);
}

Tensor bernoulli(const Tensor& p, Generator* gen) {
  EMBER_CHECK(is_floating(p.dtype()), "bernoulli: probabilities must be floating point, got ", dtype_name(p.dtype()));
  Tensor probs = p.detach().to(Device::cpu(), DType::Float64).contiguous();
  for (double v : probs.to_vector<double>())
    EMBER_CHECK(v >= 0.0 && v <= 1.0, "bernoulli: probability ", v, " is outside [0, 1]");
  Tensor out = empty(p.shape(), {p.dtype(), p.device()});
  return fill_random(out, {RandomKind::Bernoulli}, gen, probs.to(p.device()));
}

Tensor bernoulli(Shape shape, double p, TensorOptions opts, Generator* gen) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: probability ", p, " is outside [0, 1]");
  opts.requires_grad = false;
  Tensor out = empty(std::move(shape), opts);
  return fill_random(out, {RandomKind::Bernoulli, p}, gen);
}

Tensor randperm(int64_t n, Generator* gen) {
  EMBER_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  Generator& g = gen ? *gen : default_generator();
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  const uint64_t seed = g.seed(), off = g.reserve(static_cast<uint64_t>(n + 1) / 2);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates, draw i from element i of the stream
    Philox4x32 r = philox_block(seed, off + static_cast<uint64_t>(i) / 2);
    const int w = 2 * static_cast<int>(i % 2);
    uint64_t x = (static_cast<uint64_t>(r.v[w]) << 32) | r.v[w + 1];
    std::swap(v[i], v[x % static_cast<uint64_t>(i + 1)]);
  }
  return from_vector(v, {n});
}

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  EMBER_CHECK(is_floating(t.dtype()), "uniform_: dtype must be floating point, got ", dtype_name(t.dtype()));
  EMBER_CHECK(low <= high, "uniform_: low (", low, ") must not exceed high (", high, ")");
  return fill_random(t, {RandomKind::Uniform, low, high}, gen);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  EMBER_CHECK(is_floating(t.dtype()), "normal_: dtype must be floating point, got ", dtype_name(t.dtype()));
  EMBER_CHECK(std >= 0.0, "normal_: std must be non-negative, got ", std);
  return fill_random(t, {RandomKind::Normal, mean, std}, gen);
}

// ------------------------------------------------------------ from values

template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape, std::optional<TensorOptions> opts) {
  EMBER_CHECK(numel_of(shape) == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
              " values do not fill shape ", shape_str(shape));
  TensorOptions o = opts.value_or(TensorOptions{dtype_of<T>(), Device::cpu(), false});
  Tensor host = empty(shape, {dtype_of<T>(), Device::cpu()});
  if (!values.empty()) std::memcpy(host.raw_data(), values.data(), values.size() * sizeof(T));
  Tensor t = host.to(o.device, o.dtype);
  if (o.requires_grad) t.requires_grad_(true);
  return t;
}

template Tensor from_vector<float>(const std::vector<float>&, Shape, std::optional<TensorOptions>);
template Tensor from_vector<double>(const std::vector<double>&, Shape, std::optional<TensorOptions>);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, Shape, std::optional<TensorOptions>);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape, std::optional<TensorOptions>);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, Shape, std::optional<TensorOptions>);

// std::vector<bool> is bit-packed, so it cannot be copied with memcpy: widen to one byte each.
template <>
Tensor from_vector<bool>(const std::vector<bool>& values, Shape shape, std::optional<TensorOptions> opts) {
  std::vector<uint8_t> bytes(values.begin(), values.end());
  return from_vector(bytes, std::move(shape), opts.value_or(TensorOptions{DType::Bool, Device::cpu(), false}));
}

Tensor tensor(std::initializer_list<double> values, TensorOptions opts) {
  return from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}, opts);
}

Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opts) {
  std::vector<double> v;
  const int64_t r = static_cast<int64_t>(rows.size());
  int64_t c = -1;
  for (const auto& row : rows) {
    EMBER_CHECK(c < 0 || static_cast<int64_t>(row.size()) == c, "tensor: rows have different lengths (", c, " and ",
                row.size(), ")");
    c = static_cast<int64_t>(row.size());
    v.insert(v.end(), row.begin(), row.end());
  }
  return from_vector(v, {r, std::max<int64_t>(c, 0)}, opts);
}

}  // namespace ember
