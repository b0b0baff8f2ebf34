// batch_norm (train and eval, running statistics, [N, C], [N, C, L], [N, C, H, W]) and layer_norm:
// values against float64 loops, closed-form running statistics after one step, gradchecks,
// float32 accuracy on badly-centred data, and errors.
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

namespace {

// Normalises each channel of x [N, C, S...] with its batch statistics (train) or given ones.
std::vector<double> naive_bn(const Tensor& x, const std::vector<double>& w, const std::vector<double>& b,
                             const std::vector<double>* mean_in, const std::vector<double>* var_in, double eps,
                             std::vector<double>* mean_out = nullptr, std::vector<double>* var_out = nullptr) {
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C);
  std::vector<double> xv = vec(x), y(xv.size());
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    if (mean_in) {
      m = (*mean_in)[c], v = (*var_in)[c];
    } else {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) m += xv[static_cast<size_t>((n * C + c) * S + s)];
      m /= static_cast<double>(N * S);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) v += std::pow(xv[static_cast<size_t>((n * C + c) * S + s)] - m, 2);
      v /= static_cast<double>(N * S);
    }
    if (mean_out) mean_out->push_back(m), var_out->push_back(v);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        y[i] = (xv[i] - m) / std::sqrt(v + eps) * (w.empty() ? 1.0 : w[c]) + (b.empty() ? 0.0 : b[c]);
      }
  }
  return y;
}

}  // namespace

TEST(BatchNorm, TrainingValuesForEveryLayout) {
  for (const Shape& s : {Shape{6, 3}, Shape{4, 3, 5}, Shape{2, 3, 4, 5}, Shape{3, 3, 2, 2, 2}}) {
    SCOPED_TRACE(shape_str(s));
    Tensor x = randn_t(s, 1, DType::Float64);
    Tensor w = randn_t({3}, 2, DType::Float64), b = randn_t({3}, 3, DType::Float64);
    Tensor y = batch_norm(x, Tensor(), Tensor(), w, b, true);
    EXPECT_EQ(y.shape(), s);
    EXPECT_TRUE(all_close(y, naive_bn(x, vec(w), vec(b), nullptr, nullptr, 1e-5), 1e-12, 1e-12));
    Tensor y2 = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-3);
    EXPECT_TRUE(all_close(y2, naive_bn(x, {}, {}, nullptr, nullptr, 1e-3), 1e-12, 1e-12));
  }
}

TEST(BatchNorm, RunningStatisticsAfterOneStepClosedForm) {
  // One channel, values 1..4: mean 2.5, biased var 1.25 (normalisation), unbiased 5/3 (running).
  Tensor x = tensor({1, 2, 3, 4}, {.dtype = DType::Float64}).reshape({4, 1});
  Tensor rm = zeros({1}, {.dtype = DType::Float64}), rv = ones({1}, {.dtype = DType::Float64});
  const uint32_t v0 = rm.version();
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_NEAR(rm.item(), 0.9 * 0 + 0.1 * 2.5, 1e-15);
  EXPECT_NEAR(rv.item(), 0.9 * 1 + 0.1 * 5.0 / 3.0, 1e-15);
  EXPECT_GT(rm.version(), v0);
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_NEAR(vec(y)[0], (1 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-12);
  // A second step with momentum 0.5 keeps blending.
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.5, 1e-5);
  EXPECT_NEAR(rm.item(), 0.5 * 0.25 + 0.5 * 2.5, 1e-15);
}

TEST(BatchNorm, EvalUsesRunningStatisticsAndLeavesThem) {
  Tensor x = randn_t({5, 2, 3}, 4, DType::Float64);
  Tensor rm = tensor({0.5, -1.0}, {.dtype = DType::Float64}), rv = tensor({2.0, 0.25}, {.dtype = DType::Float64});
  Tensor w = tensor({1.5, -0.5}, {.dtype = DType::Float64}), b = tensor({0.1, 0.2}, {.dtype = DType::Float64});
  Tensor y = batch_norm(x, rm, rv, w, b, false);
  std::vector<double> m{0.5, -1.0}, v{2.0, 0.25};
  EXPECT_TRUE(all_close(y, naive_bn(x, vec(w), vec(b), &m, &v, 1e-5), 1e-12, 1e-12));
  EXPECT_EQ(vec(rm), m);
  EXPECT_EQ(vec(rv), v);
  // Train mode gives a different answer on the same input (batch statistics).
  EXPECT_FALSE(all_close(batch_norm(x, rm.clone(), rv.clone(), w, b, true), vec(y), 1e-6, 1e-6));
}

TEST(BatchNorm, NonContiguousRunningStatisticsAreUpdatedInPlace) {
  Tensor base = zeros({4}, {.dtype = DType::Float64});
  Tensor rm = base.slice(0, 0, 4, 2);  // elements 0 and 2
  Tensor rv = ones({2}, {.dtype = DType::Float64});
  Tensor x = tensor({{1, 10}, {3, 30}}, {.dtype = DType::Float64});
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 1.0);
  EXPECT_EQ(vec(base), (std::vector<double>{2, 0, 20, 0}));
  EXPECT_TRUE(all_close(rv, {2.0, 200.0}, 1e-12, 1e-12));  // unbiased variances
}

TEST(BatchNorm, Float32StatisticsOnBadlyCentredData) {
  // Mean 1e4, spread 1e-1: a float32 accumulation of x^2 would lose the variance entirely.
  Tensor noise = randn_t({64, 2, 8, 8}, 5, DType::Float64);
  Tensor x64 = add(mul(noise, 0.1), 1e4);
  Tensor y32 = batch_norm(x64.to(DType::Float32), Tensor(), Tensor(), Tensor(), Tensor(), true);
  EXPECT_TRUE(
      all_close(y32, naive_bn(x64.to(DType::Float32).to(DType::Float64), {}, {}, nullptr, nullptr, 1e-5), 2e-3, 1e-3));
}

TEST(BatchNorm, Gradcheck) {
  Tensor w = randn_t({3}, 7, DType::Float64, true), b = randn_t({3}, 8, DType::Float64, true);
  for (const Shape& s : {Shape{5, 3}, Shape{2, 3, 2, 3}}) {
    SCOPED_TRACE(shape_str(s));
    Tensor x = randn_t(s, 6, DType::Float64, true);
    EXPECT_TRUE(
        grad_ok([](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
                {x, w, b}));
    EXPECT_TRUE(grad_ok(
        [](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
        {x}));
    Tensor rm = randn_t({3}, 9, DType::Float64), r = randn_t({3}, 10, DType::Float64), rv = add(mul(r, r), 0.5);
    EXPECT_TRUE(grad_ok(
        [rm, rv](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false); }, {x, w, b}));
  }
}

TEST(Norms, NonContiguousAndEmptyInputs) {
  Tensor base = randn_t({4, 3, 5}, 19, DType::Float64);
  Tensor x = base.transpose(0, 2);  // [5, 3, 4], not contiguous
  Tensor rm = zeros({3}, {.dtype = DType::Float64}), rv = ones({3}, {.dtype = DType::Float64});
  EXPECT_TRUE(all_close(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true),
                        vec(batch_norm(x.contiguous(), Tensor(), Tensor(), Tensor(), Tensor(), true)), 1e-14, 1e-14));
  EXPECT_TRUE(all_close(layer_norm(x, {4}), vec(layer_norm(x.contiguous(), {4})), 1e-14, 1e-14));
  EXPECT_EQ(layer_norm(zeros({0, 4}), {4}).shape(), (Shape{0, 4}));
  EXPECT_EQ(batch_norm(zeros({0, 3}), rm.to(DType::Float32), rv.to(DType::Float32), Tensor(), Tensor(), false).shape(),
            (Shape{0, 3}));
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({4, 3});
  expect_error([&] { batch_norm(zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
               {"batch_norm", "at least 2 dims"});
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), zeros({2}), Tensor(), true); },
               {"batch_norm", "weight must have shape [3]", "[2]"});
  expect_error(
      [&] {
        batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"batch_norm", "more than 1 value per channel"});
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); },
               {"batch_norm", "needed in eval mode"});
  expect_error([&] { batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), true); }, {"batch_norm", "both be given"});
  expect_error([&] { batch_norm(x, zeros({3}, {.dtype = DType::Float64}), ones({3}), Tensor(), Tensor(), true); },
               {"batch_norm", "running_mean dtype float64"});
  expect_error([&] { batch_norm(x, zeros({3}), ones({3}), Tensor(), Tensor(), true, 1.5); },
               {"batch_norm", "momentum"});
  expect_error(
      [&] {
        batch_norm(zeros({4, 3}, {.dtype = DType::Int64}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"batch_norm", "float32 or float64"});
}

TEST(LayerNorm, ValuesAgainstLoops) {
  Tensor x = randn_t({2, 3, 4, 5}, 11, DType::Float64);
  for (const Shape& ns : {Shape{5}, Shape{4, 5}, Shape{3, 4, 5}}) {
    SCOPED_TRACE(shape_str(ns));
    const int64_t D = numel_of(ns), M = x.numel() / D;
    Tensor w = randn_t(ns, 12, DType::Float64), b = randn_t(ns, 13, DType::Float64);
    std::vector<double> xv = vec(x), wv = vec(w), bv = vec(b), ref, ref_plain;
    for (int64_t r = 0; r < M; ++r) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < D; ++i) m += xv[static_cast<size_t>(r * D + i)];
      m /= static_cast<double>(D);
      for (int64_t i = 0; i < D; ++i) v += std::pow(xv[static_cast<size_t>(r * D + i)] - m, 2);
      v /= static_cast<double>(D);
      for (int64_t i = 0; i < D; ++i) {
        const double xh = (xv[static_cast<size_t>(r * D + i)] - m) / std::sqrt(v + 1e-5);
        ref.push_back(xh * wv[static_cast<size_t>(i)] + bv[static_cast<size_t>(i)]);
        ref_plain.push_back(xh);
      }
    }
    EXPECT_TRUE(all_close(layer_norm(x, ns, w, b), ref, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(layer_norm(x, ns), ref_plain, 1e-12, 1e-12));
  }
  Tensor f = randn_t({7, 33}, 14, DType::Float32);
  EXPECT_TRUE(all_close(layer_norm(f, {33}), vec(layer_norm(f.to(DType::Float64), {33})), 1e-5, 1e-5));
}

TEST(LayerNorm, Gradcheck) {
  Tensor x = randn_t({3, 2, 4}, 15, DType::Float64, true);
  Tensor w = randn_t({2, 4}, 16, DType::Float64, true), b = randn_t({2, 4}, 17, DType::Float64, true);
  EXPECT_TRUE(grad_ok(
      [](const std::vector<Tensor>& in) {
        return layer_norm(in[0], {2, 4}, in[1], in[2]);
      },
      {x, w, b}));
  EXPECT_TRUE(grad_ok([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}); }, {x}));
  Tensor w4 = randn_t({4}, 18, DType::Float64, true);
  EXPECT_TRUE(grad_ok([](const std::vector<Tensor>& in) { return layer_norm(in[0], {4}, in[1]); }, {x, w4}));
  EXPECT_EQ(layer_norm(x, {4}).grad_fn()->name(), "LayerNormBackward");
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { layer_norm(x, {4}); }, {"layer_norm", "normalized_shape [4] does not match", "[2, 3]"});
  expect_error([&] { layer_norm(x, {2, 2, 3}); }, {"layer_norm", "does not match"});
  expect_error([&] { layer_norm(x, {}); }, {"layer_norm", "at least one dim"});
  expect_error([&] { layer_norm(x, {3}, zeros({2})); }, {"layer_norm", "weight must have shape [3]"});
  expect_error([&] { layer_norm(x, {3}, Tensor(), zeros({3}, {.dtype = DType::Float64})); },
               {"layer_norm", "bias dtype float64"});
}
