// Shared helpers for the benchmark programs: median-of-N timing and a plain-text table. Benchmarks
// print; they never assert on time (machines are shared and noisy, so compare ratios measured in
// the same run rather than absolute times).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/cpu_capability.h"

namespace ember::bench {

// The header line every benchmark prints first: the CPU and the capability level Ember's kernels
// run at ("cpu: Intel(R) Xeon(R) Processor, kernels at avx512 (of baseline, avx2, avx512)").
inline void print_cpu_line() {
  std::printf("cpu: %s\n", cpu_description().c_str());
}

// The median of `v` (the upper middle for an even count; 0 for none): what every table reports of
// its rounds.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A steady-clock duration in seconds.
inline double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Median wall time in seconds of `reps` runs of f after `warmup` unmeasured runs.
template <typename F>
double median_seconds(F&& f, int reps = 7, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Picks a repetition count so that one measurement takes roughly `target` seconds.
template <typename F>
int calibrate(F&& f, double target = 0.05) {
  auto a = std::chrono::steady_clock::now();
  f();
  double one = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  return std::max(1, std::min(1000, static_cast<int>(target / std::max(one, 1e-7))));
}

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  void print() const {
    std::vector<size_t> w(header.size());
    for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
    for (const auto& r : rows)
      for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
    auto line = [&](const std::vector<std::string>& r) {
      std::printf("|");
      for (size_t i = 0; i < w.size(); ++i)
        std::printf(" %-*s |", static_cast<int>(w[i]), i < r.size() ? r[i].c_str() : "");
      std::printf("\n");
    };
    line(header);
    std::printf("|");
    for (size_t i = 0; i < w.size(); ++i) std::printf("%s|", std::string(w[i] + 2, '-').c_str());
    std::printf("\n");
    for (const auto& r : rows) line(r);
    std::fflush(stdout);
  }
};

// --help (or -h) anywhere on the command line: prints `usage` (a printf format whose %s is the
// program's name) on stdout and returns true, and the program exits 0 without running its
// benchmark, as every bench program does.
inline bool help_requested(int argc, char** argv, const char* usage) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(usage, argv[0]);
      return true;
    }
  return false;
}

// Runs a benchmark's main body: an error (a bad EMBER_CPU_CAPABILITY, a missing data file) is a
// message and exit status 1, not an uncaught exception that aborts.
template <typename F>
int guarded_main(const char* program, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return 1;
  }
}

inline std::string fmt(double v, const char* f = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace ember::bench
