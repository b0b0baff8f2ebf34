#include "layers/init.h"

#include <cmath>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/ops/creation.h"

namespace ember::nn::init {

namespace {

void check_defined(const Tensor& t, const char* op) {
  EMBER_CHECK(t.defined(), "init::", op, ": the tensor is undefined");
  EMBER_CHECK(t.is_floating_point(), "init::", op, ": the tensor must be floating point, got ", dtype_name(t.dtype()));
}

double fan_for(const Tensor& t, FanMode mode) {
  Fans f = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == FanMode::FanIn ? f.fan_in : f.fan_out);
}

}  // namespace

double calculate_gain(Nonlinearity nonlinearity, double param) {
  switch (nonlinearity) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::Relu:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyRelu: {
      const double slope = param < 0 ? 0.01 : param;
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::Selu:
      return 3.0 / 4.0;
  }
  return 1.0;
}

Fans calculate_fan_in_and_fan_out(const Tensor& t) {
  EMBER_CHECK(t.defined() && t.dim() >= 2, "init: fan in and fan out need a tensor of at least 2 dims, got shape ",
              t.defined() ? shape_str(t.shape()) : std::string("(undefined)"));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double low, double high, Generator* gen) {
  check_defined(t, "uniform_");
  NoGradGuard ng;
  return ember::uniform_(t, low, high, gen);
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_defined(t, "normal_");
  NoGradGuard ng;
  return ember::normal_(t, mean, std, gen);
}

Tensor& constant_(Tensor& t, double value) {
  EMBER_CHECK(t.defined(), "init::constant_: the tensor is undefined");
  NoGradGuard ng;
  return t.fill_(value);
}

Tensor& zeros_(Tensor& t) {
  return constant_(t, 0.0);
}

Tensor& ones_(Tensor& t) {
  return constant_(t, 1.0);
}

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_defined(t, "kaiming_uniform_");
  if (t.numel() == 0) return t;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(fan_for(t, mode));
  const double bound = std::sqrt(3.0) * std;
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_defined(t, "kaiming_normal_");
  if (t.numel() == 0) return t;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(fan_for(t, mode));
  return init::normal_(t, 0.0, std, gen);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_defined(t, "xavier_uniform_");
  Fans f = calculate_fan_in_and_fan_out(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(f.fan_in + f.fan_out));
  return init::uniform_(t, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_defined(t, "xavier_normal_");
  Fans f = calculate_fan_in_and_fan_out(t);
  return init::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(f.fan_in + f.fan_out)), gen);
}

Tensor& orthogonal_(Tensor& t, double gain, Generator* gen) {
  check_defined(t, "orthogonal_");
  EMBER_CHECK(t.dim() >= 2, "init::orthogonal_: needs a tensor of at least 2 dims, got shape ", shape_str(t.shape()));
  if (t.numel() == 0) return t;
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  // QR of the tall orientation: m >= n.
  const bool wide = rows < cols;
  const int64_t m = wide ? cols : rows, n = wide ? rows : cols;
  std::vector<double> a = randn({rows, cols}, {.dtype = DType::Float64}, gen).to_vector<double>();
  // A as m x n, column-major-free indexing: A(i, j).
  std::vector<double> A(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const double v = a[static_cast<size_t>(i * cols + j)];
      if (wide)
        A[static_cast<size_t>(j * n + i)] = v;
      else
        A[static_cast<size_t>(i * n + j)] = v;
    }
  auto at = [&](int64_t i, int64_t j) -> double& { return A[static_cast<size_t>(i * n + j)]; };
  // Householder: H_k = I - 2 v v^T / (v^T v) zeroes column k below the diagonal.
  std::vector<std::vector<double>> vs(static_cast<size_t>(n));
  std::vector<double> rdiag(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    double norm = 0;
    for (int64_t i = k; i < m; ++i) norm += at(i, k) * at(i, k);
    norm = std::sqrt(norm);
    const double alpha = at(k, k) > 0 ? -norm : norm;
    std::vector<double> v(static_cast<size_t>(m - k));
    for (int64_t i = k; i < m; ++i) v[static_cast<size_t>(i - k)] = at(i, k);
    v[0] -= alpha;
    double vv = 0;
    for (double x : v) vv += x * x;
    if (vv > 0) {
      for (int64_t j = k; j < n; ++j) {
        double dotv = 0;
        for (int64_t i = k; i < m; ++i) dotv += v[static_cast<size_t>(i - k)] * at(i, j);
        const double s = 2.0 * dotv / vv;
        for (int64_t i = k; i < m; ++i) at(i, j) -= s * v[static_cast<size_t>(i - k)];
      }
    }
    rdiag[static_cast<size_t>(k)] = at(k, k);
    vs[static_cast<size_t>(k)] = std::move(v);
  }
  // Q[:, :n] = H_0 H_1 ... H_{n-1} E, applied right to left to the first n columns of I.
  std::vector<double> Q(static_cast<size_t>(m * n), 0.0);
  auto q = [&](int64_t i, int64_t j) -> double& { return Q[static_cast<size_t>(i * n + j)]; };
  for (int64_t j = 0; j < n; ++j) q(j, j) = 1.0;
  for (int64_t k = n - 1; k >= 0; --k) {
    const auto& v = vs[static_cast<size_t>(k)];
    double vv = 0;
    for (double x : v) vv += x * x;
    if (vv == 0) continue;
    for (int64_t j = 0; j < n; ++j) {
      double dotv = 0;
      for (int64_t i = k; i < m; ++i) dotv += v[static_cast<size_t>(i - k)] * q(i, j);
      const double s = 2.0 * dotv / vv;
      for (int64_t i = k; i < m; ++i) q(i, j) -= s * v[static_cast<size_t>(i - k)];
    }
  }
  // Unique QR: make diag(R) positive by flipping the matching columns of Q.
  for (int64_t j = 0; j < n; ++j)
    if (rdiag[static_cast<size_t>(j)] < 0)
      for (int64_t i = 0; i < m; ++i) q(i, j) = -q(i, j);
  std::vector<double> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[static_cast<size_t>(i * cols + j)] = gain * (wide ? q(j, i) : q(i, j));
  NoGradGuard ng;
  t.copy_(from_vector(out, {rows, cols}).view(t.shape()));
  return t;
}

}  // namespace ember::nn::init
