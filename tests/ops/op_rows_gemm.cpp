// Rows: the GEMM and dot kernels called as the stubs take them (core/gemm_kernels.h), with what
// the op layer never hands them: leading dimensions wider than the matrix (the padding columns
// of C must come back untouched), alpha and beta of any value on single and batched GEMMs, k = 0
// and alpha = 0 (A and B not read: their NaNs do not reach C), beta = 0 over a C full of NaN,
// batch strides with a broadcast (stride 0) B, and dot with incx = 2 and n = 0 (the ops fill
// C or the dot themselves there). Every transpose pair, float32 and float64, sizes inside one
// tile, ragged edges over several tiles both ways (float 128 x 128, double 64 x 64) with enough
// k slices to cycle both shared-memory stages, outputs with more row tiles than column tiles
// (core/cuda/gemm_geometry.h puts those on grid x), the two-stage dot, and float GEMMs on the
// tensor-core kernel (EMBER_GEMM_TF32=1) on operands tf32 holds exactly, so the only rounding left
// is the float accumulation. These rows took over tests/emu's GEMM checks (the ops' own rows,
// with gradients, are op_rows_nn.cpp's).
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/gemm_kernels.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

struct Mat {
  const char* name;
  int64_t m, n, k;
  int64_t pad;  // extra columns in every leading dimension
  double alpha = 1.0, beta = 0.0;
};

// float32 results against the float64 reference; float64 against float64.
double tol_of(DType dt) {
  return dt == DType::Float32 ? 1e-5 : 1e-11;
}

// Values tf32 holds exactly (at most 10 significant bits), so that its input rounding is exact.
Tensor tf32_exact(Generator& g, Shape s) {
  return div(randint(-1023, 1024, std::move(s), {.dtype = DType::Float64}, &g), 256.0).to(DType::Float32);
}

// EMBER_GEMM_TF32=1 for one scope (the CUDA GEMM reads it on every call; the CPU ignores it).
class Tf32Scope {
 public:
  Tf32Scope() {
    if (const char* v = std::getenv("EMBER_GEMM_TF32")) old_ = v;
    setenv("EMBER_GEMM_TF32", "1", 1);
  }
  ~Tf32Scope() { old_ ? setenv("EMBER_GEMM_TF32", old_->c_str(), 1) : unsetenv("EMBER_GEMM_TF32"); }

 private:
  std::optional<std::string> old_;
};

// C = alpha op(A) op(B) + beta C over stored A [batch, ar, ac], B [1 or batch, br, bc] and
// C [batch, m, n + pad]; the result is all of C, padding included. beta 0 starts C as NaN.
OpRow gemm_row(const std::string& name, DType dt, bool ta, bool tb, const Mat& c, int64_t batch = 1,
               bool broadcast_b = false, bool tf32 = false) {
  const int64_t ar = ta ? c.k : c.m, ac = (ta ? c.m : c.k) + c.pad;
  const int64_t br = tb ? c.n : c.k, bc = (tb ? c.k : c.n) + c.pad;
  const int64_t cc = c.n + c.pad;
  OpRow r{name,
          [=](Generator& g) {
            auto make = [&](Shape s) {
              return tf32 ? tf32_exact(g, std::move(s)) : randn(std::move(s), {.dtype = dt}, &g);
            };
            Tensor a = make({batch, ar, ac}), b = make({broadcast_b ? 1 : batch, br, bc});
            Tensor c0 = randn({batch, c.m, cc}, {.dtype = dt}, &g);
            if (c.beta == 0.0) c0.fill_(std::numeric_limits<double>::quiet_NaN());
            return Inputs{a, b, c0};
          },
          [=](const Inputs& x) {
            Tensor out = x[2].detach().clone();
            GemmArgs g;
            g.dtype = out.dtype(), g.trans_a = ta, g.trans_b = tb, g.m = c.m, g.n = c.n, g.k = c.k;
            g.alpha = c.alpha, g.beta = c.beta;
            g.a = x[0].raw_data(), g.lda = std::max<int64_t>(ac, 1);
            g.b = x[1].raw_data(), g.ldb = std::max<int64_t>(bc, 1);
            g.c = out.raw_data(), g.ldc = std::max<int64_t>(cc, 1);
            std::optional<Tf32Scope> scope;
            if (tf32) scope.emplace();
            if (batch == 1 && !tf32)
              gemm_stub(out.device())(g);
            else
              gemm_batched_stub(out.device())(g, batch, ar * ac, broadcast_b ? 0 : br * bc, c.m * cc);
            return out;
          },
          tol_of(dt)};
  // Sums of k products scaled by alpha, plus beta C (standard normal C: under 5).
  r.atol = accumulation_atol(dt, c.k, 25.0 * std::max(1.0, std::abs(c.alpha))) +
           accumulation_atol(dt, 1, 5.0 * std::abs(c.beta));
  r.grad = r.gradcheck = false;
  r.strided = false;  // the layout is the arguments'
  return r;
}

std::string transposes(bool ta, bool tb) {
  return std::string(ta ? "t" : "n") + (tb ? "t" : "n");
}

}  // namespace

namespace {

void add_gemm_shape_and_tile_rows(std::vector<OpRow>& t) {
  const std::vector<Mat> small = {
      {"one_tile", 37, 45, 29, 0},                     // k not a multiple of the slice
      {"single", 1, 1, 1, 0},                          // one element
      {"padded_alpha_beta", 70, 3, 19, 3, 0.5, -1.5},  // leading dimensions past the matrix
      {"one_k_slice", 5, 67, 8, 1, 2.0, 1.0},
      {"k0", 9, 11, 0, 0, 1.0, 0.5},  // C = beta C
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = dtype_name(dt);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        for (const Mat& c : small)
          t.push_back(gemm_row("gemm_" + d + "_" + transposes(ta, tb) + "_" + c.name, dt, ta, tb, c));
        // More row tiles than column tiles, ragged both ways.
        t.push_back(gemm_row("gemm_" + d + "_" + transposes(ta, tb) + "_tall", dt, ta, tb, {"", 300, 70, 19, 1}));
      }
    // alpha 0: NaN operands are not read.
    t.push_back({"gemm_" + d + "_alpha0_ignores_nan_operands",
                 [dt](Generator& g) {
                   return Inputs{full({4, 5}, NAN, {.dtype = dt}), full({5, 3}, NAN, {.dtype = dt}),
                                 randn({4, 3}, {.dtype = dt}, &g)};
                 },
                 [](const Inputs& x) {
                   Tensor out = x[2].detach().clone();
                   GemmArgs g;
                   g.dtype = out.dtype(), g.m = 4, g.n = 3, g.k = 5, g.alpha = 0.0, g.beta = 2.0;
                   g.a = x[0].raw_data(), g.lda = 5, g.b = x[1].raw_data(), g.ldb = 3, g.c = out.raw_data(), g.ldc = 3;
                   gemm_stub(out.device())(g);
                   return out;
                 },
                 tol_of(dt), false, false, false});
    // Batched: strided, B broadcast over the batch, alpha and beta.
    t.push_back(gemm_row("gemm_" + d + "_batched", dt, false, false, {"", 13, 17, 11, 0}, 3));
    t.push_back(
        gemm_row("gemm_" + d + "_batched_broadcast_b", dt, true, false, {"", 13, 17, 11, 1, 1.0, 1.0}, 3, true));
    t.push_back(gemm_row("gemm_" + d + "_batched_alpha", dt, false, true, {"", 6, 9, 21, 0, 0.5, 0.0}, 2));
  }
  // Several tiles each way with ragged edges (float 128 x 128, double 64 x 64).
  t.push_back(gemm_row("gemm_float32_nn_tiles_3x3", DType::Float32, false, false, {"", 131, 133, 41, 0}));
  t.push_back(
      gemm_row("gemm_float32_tt_tiles_padded_beta", DType::Float32, true, true, {"", 130, 129, 17, 2, 1.0, 1.0}));
  t.push_back(gemm_row("gemm_float64_nt_tiles_2x3", DType::Float64, false, true, {"", 67, 129, 33, 1}));
  t.push_back(
      gemm_row("gemm_float64_tn_tiles_alpha_beta", DType::Float64, true, false, {"", 130, 65, 25, 0, -1.0, 2.0}));
  // Row tiles on grid x: 3 x 2 and 4 x 3 tiles, and batched.
  t.push_back(gemm_row("gemm_float32_nn_tall_3x2_tiles", DType::Float32, false, false, {"", 260, 129, 9, 0, 1.0, 0.5}));
  t.push_back(gemm_row("gemm_float64_tn_tall_4x3_tiles", DType::Float64, true, false, {"", 200, 130, 9, 0}));
  t.push_back(gemm_row("gemm_float32_nt_tall_batched", DType::Float32, false, true, {"", 140, 20, 9, 0}, 2));
  // Split-K on CUDA (core/cuda/gemm.cu): few tiles and a deep K run as slices of K added in order:
  // K 1000 in 10 equal slices (one launch), K 998 in 14 (13 of 72, the last 62: a second launch),
  // every transpose; C NaN where beta is 0 (not read); a padded C whose rows are not a multiple of
  // 4 floats wide (the workspace's are) with alpha and beta; MnistCnn's fc1 in 49 slices of 64.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      t.push_back(
          gemm_row("gemm_float32_" + transposes(ta, tb) + "_split_k", DType::Float32, ta, tb, {"", 24, 36, 1000, 0}));
      t.push_back(gemm_row("gemm_float32_" + transposes(ta, tb) + "_split_k_padded_alpha_beta", DType::Float32, ta, tb,
                           {"", 22, 30, 998, 2, 0.5, -1.5}));
    }
  t.push_back(gemm_row("gemm_float32_nn_split_k_fc1", DType::Float32, false, false, {"", 64, 128, 3136, 0}));
  // The CPU's packed-panel path (core/cpu/gemm_kernel.cpp, avx2 level): K over three 256-deep
  // blocks and rows over three row blocks, accumulating into a padded C; A read down its columns.
  t.push_back(gemm_row("gemm_float32_nn_deep_k_many_rows_beta1", DType::Float32, false, false,
                       {"", 450, 48, 600, 1, 1.0, 1.0}));
  t.push_back(gemm_row("gemm_float32_tn_panel_columns", DType::Float32, true, false, {"", 400, 64, 200, 2}));
}

void add_tf32_gemm_and_dot_rows(std::vector<OpRow>& t) {
  // The tensor-core float GEMM: every transpose, ragged edges, two row and two column tiles,
  // alpha/beta, padding, a batch.
  const struct {
    bool ta, tb;
    Mat c;
    int64_t batch;
  } tf32_cases[] = {
      {false, false, {"", 37, 21, 13, 0}, 1},          {true, false, {"", 19, 70, 9, 1, 0.5, -1.0}, 1},
      {false, true, {"", 70, 11, 17, 2, 1.0, 1.0}, 1}, {true, true, {"", 23, 29, 8, 0}, 1},
      {false, false, {"", 9, 14, 11, 0}, 2},
  };
  for (const auto& c : tf32_cases)
    t.push_back(gemm_row(
        "gemm_tf32_" + transposes(c.ta, c.tb) + "_m" + std::to_string(c.c.m) + "_batch" + std::to_string(c.batch),
        DType::Float32, c.ta, c.tb, c.c, c.batch, false, true));

  // dot over every second element of x; 20000 and 70001 take the two-stage path (blocks of 8192,
  // then their partials in order).
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {0, 1, 37, 300, 20000, 70001}) {
      OpRow r{std::string("dot_kernel_") + dtype_name(dt) + "_n" + std::to_string(n) + "_incx2",
              [dt, n](Generator& g) {
                return Inputs{randn({std::max<int64_t>(2 * n, 1)}, {.dtype = dt}, &g),
                              randn({std::max<int64_t>(n, 1)}, {.dtype = dt}, &g)};
              },
              [n](const Inputs& x) {
                Tensor out = zeros({1}, x[0].options());
                dot_stub(out.device())(out.dtype(), n, x[0].raw_data(), 2, x[1].raw_data(), 1, out.raw_data());
                return out;
              },
              tol_of(dt),
              false,
              false,
              false};
      t.push_back(std::move(r));
    }
}

}  // namespace

void add_gemm_rows(std::vector<OpRow>& t) {
  add_gemm_shape_and_tile_rows(t);
  add_tf32_gemm_and_dot_rows(t);
}

}  // namespace ember::ops_test
