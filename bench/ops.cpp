// bench/ops: Ember's CPU ops against references measured in the same run: matmul against a direct
// OpenBLAS sgemm call, memory-bound ops (elementwise, reductions, softmax) against a memcpy of
// the same number of bytes. Prints a markdown table whose ratio column is reference time / Ember
// time: 1.00 is parity, higher is better.
#include "core/ops.h"

#include <cblas.h>

#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "core/parallel.h"

using namespace ember;
using namespace ember::bench;

namespace {

void add_row(Table& t, const std::string& what, const std::string& size, double sec, double work, const char* unit,
             double ref_sec, const std::string& ref) {
  t.rows.push_back({what, size, fmt(sec * 1e3, "%.3f"), fmt(work / sec / 1e9, "%.1f") + " " + unit,
                    ref + " " + fmt(ref_sec * 1e3, "%.3f") + " ms", fmt(ref_sec / sec)});
}

template <typename F>
double timed(F&& f) {
  int reps = calibrate(f);
  return median_seconds([&] {
           for (int i = 0; i < reps; ++i) f();
         }) /
         reps;
}

void bench_matmul(Table& t, int64_t m, int64_t k, int64_t n, const std::string& label) {
  Tensor a = randn({m, k}), b = randn({k, n});
  Tensor c = empty({m, n});
  double sec = timed([&] { c = matmul(a, b); });
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  std::vector<float> pc(static_cast<size_t>(m * n));
  double ref = timed([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, pa, static_cast<int>(k), pb, static_cast<int>(n), 0.0f, pc.data(),
                static_cast<int>(n));
  });
  add_row(t, "matmul " + label, std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), sec,
          2.0 * m * k * n, "GFLOP/s", ref, "sgemm");
}

// Reference for memory-bound ops: memcpy moving `bytes` bytes (read + write counted once each).
double memcpy_time(size_t bytes) {
  std::vector<char> src(bytes / 2 + 64, 1), dst(bytes / 2 + 64);
  return timed([&] {
    parallel_for(0, static_cast<int64_t>(bytes / 2), 1 << 20, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b, src.data() + b, static_cast<size_t>(e - b));
    });
  });
}

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(
            argc, argv,
            "usage: %s [threads]\n\nTimes matmul and elementwise/reduction ops against memcpy and OpenBLAS (threads: "
            "default all cores).\n"))
      return 0;
    int threads = argc > 1 ? std::atoi(argv[1]) : get_num_threads();
    set_num_threads(threads);
    print_cpu_line();
    std::printf("bench/ops: %d thread(s); ratio = reference time / Ember time (1.00 = parity, higher is better)\n\n",
                threads);
    Table t{{"op", "size", "ember ms", "ember rate", "reference", "ratio"}, {}};
    for (int64_t s : {256, 512, 1024, 2048}) bench_matmul(t, s, s, s, "square");
    // The MNIST CNN's GEMMs at batch 64 (im2col conv as [B*OH*OW, C*KH*KW] x [C*KH*KW, OC]).
    bench_matmul(t, 64 * 26 * 26, 9, 32, "conv1");
    bench_matmul(t, 64 * 11 * 11, 288, 64, "conv2");
    bench_matmul(t, 64 * 3 * 3, 576, 64, "conv3");
    bench_matmul(t, 64, 576, 64, "fc1");
    bench_matmul(t, 64, 64, 10, "fc2");

    for (int64_t n : {int64_t{1} << 20, int64_t{1} << 22, int64_t{1} << 24, int64_t{1} << 26}) {
      Tensor a = randn({n}), b = randn({n});
      const std::string sz = std::to_string(n >> 20) + "M";
      const double bytes3 = 12.0 * static_cast<double>(n), bytes2 = 8.0 * static_cast<double>(n);
      double ref3 = memcpy_time(static_cast<size_t>(bytes3)), ref2 = memcpy_time(static_cast<size_t>(bytes2));
      Tensor c;
      add_row(t, "add", sz, timed([&] { c = add(a, b); }), bytes3, "GB/s", ref3, "memcpy");
      add_row(t, "mul", sz, timed([&] { c = mul(a, b); }), bytes3, "GB/s", ref3, "memcpy");
      add_row(t, "relu", sz, timed([&] { c = relu(a); }), bytes2, "GB/s", ref2, "memcpy");
      add_row(t, "exp", sz, timed([&] { c = exp(a); }), bytes2, "GB/s", ref2, "memcpy");
      add_row(t, "sigmoid", sz, timed([&] { c = sigmoid(a); }), bytes2, "GB/s", ref2, "memcpy");
      double ref1 = memcpy_time(static_cast<size_t>(4.0 * n));
      add_row(t, "sum", sz, timed([&] { c = sum(a); }), 4.0 * n, "GB/s", ref1, "memcpy");
      Tensor m2 = a.view({n / 1024, 1024});
      add_row(t, "sum(dim=1)", sz, timed([&] { c = sum(m2, {1}); }), 4.0 * n, "GB/s", ref1, "memcpy");
      add_row(t, "sum(dim=0)", sz, timed([&] { c = sum(m2, {0}); }), 4.0 * n, "GB/s", ref1, "memcpy");
      add_row(t, "max(dim=1)", sz, timed([&] { c = std::get<0>(max(m2, 1)); }), 4.0 * n, "GB/s", ref1, "memcpy");
      add_row(t, "softmax(dim=1)", sz, timed([&] { c = softmax(m2, 1); }), bytes2, "GB/s", ref2, "memcpy");
    }
    t.print();
    return 0;
  });
}
