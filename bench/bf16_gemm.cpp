// bench/bf16_gemm: Ember's bfloat16 GEMM (gemm_stub with bfloat16 A and B, float32 C) against its
// float32 GEMM (OpenBLAS SGEMM through the same stub) on the GEMM shapes of the training workloads
// (bench/workloads.h, bench/flops.h), at 1 and 2 threads. Columns: the float32 rate; the bfloat16
// rate at the avx512bf16 level (the vdpbf16ps kernel) and at the avx512 level (the fallback:
// widen, SGEMM); OpenBLAS's cblas_sbgemm when the loaded OpenBLAS exports it (Debian 12's 0.3.21
// does not: it is built without BUILD_BFLOAT16); and bf16 / fp32. Each cell is the median GFLOP/s
// of --rounds rounds (the kernels alternate within a round, so load drifts hit them alike), with
// the spread (min-max) of the bfloat16 and float32 columns' ratio.
//   bf16_gemm [--rounds N] [--threads 1,2]
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/cpu_capability.h"
#include "core/gemm_kernels.h"
#include "core/half_bits.h"
#include "core/parallel.h"

using namespace ember;

namespace {

struct Shape {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;
};

// The products as Ember's layers call them (conv forward: weights [OC, C*k*k] x columns).
const std::vector<Shape> kShapes = {
    {"MnistCnn c1 fwd, 4 images", 32, 2704, 9, false, false},
    {"MnistCnn c3 fwd, batch 64", 64, 576, 576, false, false},
    {"MnistCnn fc 576->64 fwd", 64, 64, 576, false, true},
    {"DCGAN D c2 fwd, batch 64", 128, 3136, 1600, false, false},
    {"DCGAN G t1 (col = W^T x)", 3200, 3136, 256, true, false},
    {"DCGAN G fc 100->12544", 64, 12544, 100, false, true},
    {"LSTM LM x W_ih^T, T*B rows", 3200, 512, 128, false, true},
    {"LSTM h W_hh^T, one step", 32, 512, 128, false, true},
    {"LSTM LM out 128->10k", 3200, 10000, 128, false, true},
    {"LSTM cls out, last step", 32, 10000, 128, false, true},
    {"square 1024", 1024, 1024, 1024, false, false},
};

using SbgemmFn = void(int, int, int, int, int, int, float, const uint16_t*, int, const uint16_t*, int, float, float*,
                      int);

struct Operands {
  std::vector<float> a32, b32, c;
  std::vector<uint16_t> a16, b16;
};

Operands make(const Shape& s) {
  Operands o;
  o.a32.resize(static_cast<size_t>(s.m * s.k));
  o.b32.resize(static_cast<size_t>(s.k * s.n));
  o.c.resize(static_cast<size_t>(s.m * s.n));
  uint32_t x = 12345;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>(x >> 8) / 16777216.0f - 0.5f;
  };
  for (float& v : o.a32) v = next();
  for (float& v : o.b32) v = next();
  for (float v : o.a32) o.a16.push_back(float_to_bf16_bits(v));
  for (float v : o.b32) o.b16.push_back(float_to_bf16_bits(v));
  return o;
}

GemmArgs args(const Shape& s, Operands& o, bool bf16) {
  GemmArgs g;
  g.dtype = bf16 ? DType::BFloat16 : DType::Float32;
  g.c_float32 = bf16;
  g.trans_a = s.ta, g.trans_b = s.tb, g.m = s.m, g.n = s.n, g.k = s.k;
  g.a = bf16 ? static_cast<const void*>(o.a16.data()) : o.a32.data();
  g.b = bf16 ? static_cast<const void*>(o.b16.data()) : o.b32.data();
  g.lda = s.ta ? s.m : s.k, g.ldb = s.tb ? s.k : s.n, g.c = o.c.data(), g.ldc = s.n;
  return g;
}

// GFLOP/s of f over about 40 ms (after one unmeasured call).
template <typename F>
double rate(const Shape& s, F&& f) {
  const int reps = bench::calibrate(f, 0.04);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  const double sec = bench::seconds(std::chrono::steady_clock::now() - t0);
  return 2.0 * static_cast<double>(s.m * s.n * s.k) * reps / sec / 1e9;
}

std::string fmt(double v, const char* spec = "%.1f") {
  char b[32];
  std::snprintf(b, sizeof b, spec, v);
  return b;
}

struct Cell {
  std::vector<double> f32, b16, fallback, sb, ratio;
};

// One shape at one thread count, `rounds` times, the kernels alternating within a round.
Cell measure(const Shape& s, Operands& o, int threads, int rounds, SbgemmFn* sbgemm, bool have_bf16_level) {
  set_num_threads(threads);
  Cell c;
  for (int r = 0; r < rounds; ++r) {
    set_cpu_capability(CpuCapability::Avx512);
    c.f32.push_back(rate(s, [&] { gemm_stub.cpu_kernel()(args(s, o, false)); }));
    c.fallback.push_back(rate(s, [&] { gemm_stub.cpu_kernel()(args(s, o, true)); }));
    if (have_bf16_level) {
      set_cpu_capability(CpuCapability::Avx512Bf16);
      c.b16.push_back(rate(s, [&] { gemm_stub.cpu_kernel()(args(s, o, true)); }));
      c.ratio.push_back(c.b16.back() / c.f32.back());
    }
    if (sbgemm)
      c.sb.push_back(rate(s, [&] {
        sbgemm(101, s.ta ? 112 : 111, s.tb ? 112 : 111, static_cast<int>(s.m), static_cast<int>(s.n),
               static_cast<int>(s.k), 1.0f, o.a16.data(), static_cast<int>(s.ta ? s.m : s.k), o.b16.data(),
               static_cast<int>(s.tb ? s.k : s.n), 0.0f, o.c.data(), static_cast<int>(s.n));
      }));
  }
  std::sort(c.ratio.begin(), c.ratio.end());
  return c;
}

std::string ratio_cell(const Cell& c) {
  if (c.ratio.empty()) return "-";
  return fmt(bench::median(c.ratio), "%.2f") + " (" + fmt(c.ratio.front(), "%.2f") + "-" + fmt(c.ratio.back(), "%.2f") +
         ")";
}

void run(const std::vector<int>& threads, int rounds, SbgemmFn* sbgemm, bool have_bf16_level) {
  bench::Table t;
  t.header = {"shape (M x N x K)"};
  for (int th : threads)
    for (const char* col : {"fp32", "bf16", "fallback", "sbgemm", "bf16/fp32 (spread)"})
      t.header.push_back(std::string(col) + " " + std::to_string(th) + "t");
  for (const Shape& s : kShapes) {
    Operands o = make(s);
    std::vector<std::string> row = {std::string(s.what) + " (" + std::to_string(s.m) + " x " + std::to_string(s.n) +
                                    " x " + std::to_string(s.k) + ")"};
    for (int th : threads) {
      const Cell c = measure(s, o, th, rounds, sbgemm, have_bf16_level);
      row.push_back(fmt(bench::median(c.f32)));
      row.push_back(have_bf16_level ? fmt(bench::median(c.b16)) : "-");
      row.push_back(fmt(bench::median(c.fallback)));
      row.push_back(sbgemm ? fmt(bench::median(c.sb)) : "absent");
      row.push_back(ratio_cell(c));
    }
    t.rows.push_back(row);
  }
  t.print();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::vector<int> threads = {1, 2};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads.clear();
      const std::string list = argv[++i];
      for (size_t b = 0; b <= list.size();) {
        const size_t e = std::min(list.find(',', b), list.size());
        threads.push_back(std::atoi(list.substr(b, e - b).c_str()));
        b = e + 1;
      }
    } else {
      std::fprintf(stderr, "usage: bf16_gemm [--rounds N] [--threads 1,2]\n");
      return 2;
    }
  }
  if (rounds < 1 || threads.empty()) {
    std::fprintf(stderr, "bf16_gemm: expected --rounds >= 1 and --threads N[,N...] >= 1\n");
    return 2;
  }
  for (int t : threads)
    if (t < 1) {
      std::fprintf(stderr, "bf16_gemm: thread counts must be >= 1\n");
      return 2;
    }
  bench::print_cpu_line();
  std::printf("cpu features: %s\n", cpu_feature_list().c_str());
  const bool have_bf16 = cpu_supports(CpuCapability::Avx512Bf16);
  auto* sbgemm = reinterpret_cast<SbgemmFn*>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  std::printf("cblas_sbgemm: %s; medians of %d rounds, GFLOP/s (2 M N K / time)\n",
              sbgemm ? "exported by the loaded OpenBLAS" : "not exported by the loaded OpenBLAS", rounds);
  if (!cpu_supports(CpuCapability::Avx512)) {
    std::printf("skipped: this CPU lacks avx512, the level the comparison runs at\n");
    return 0;
  }
  run(threads, rounds, sbgemm, have_bf16);
  return 0;
}
