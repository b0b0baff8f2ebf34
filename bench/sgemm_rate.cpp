// bench/sgemm_rate: the machine's single-precision matrix-multiply rate through OpenBLAS (the BLAS
// Ember links), square N x N x N at one thread count: the FLOP ceiling bench/compare_torch.sh
// quotes beside each workload's rate. Prints one line "sgemm <threads> <N> <median GFLOP/s>"
// over 5 timed products after one warm-up product.
//   sgemm_rate [--threads N] [--size N]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int threads = 1, n = 2048;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--size" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else {
      const bool help = a == "--help" || a == "-h";
      std::fprintf(help ? stdout : stderr, "%susage: sgemm_rate [--threads N] [--size N]\n",
                   help ? "" : ("sgemm_rate: bad argument '" + a + "'\n").c_str());
      return help ? 0 : 2;
    }
  }
  if (threads < 1 || n < 16 || n > 16384) {
    std::fprintf(stderr, "sgemm_rate: expected --threads >= 1 and --size in [16, 16384]\n");
    return 2;
  }
  openblas_set_num_threads(threads);
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size(), 0.0f);
  std::vector<double> rates;
  for (int r = 0; r <= 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(2.0 * n * n * static_cast<double>(n) / sec / 1e9);  // product 0 warms up
  }
  std::sort(rates.begin(), rates.end());
  std::printf("sgemm %d %d %.4g\n", threads, n, rates[rates.size() / 2]);
  return 0;
}
