// The main of bench/step_rate (Ember) and bench/torch_ref (libtorch): one workload of
// bench/workloads.h at one thread count, timed in a process of its own, printed as one line
//   <workload> <threads> <median steps/s> <min> <max> <samples per step> <GFLOP per step>
// over --reps timed runs of the workload's steps after one warm-up run. Plain C++: each side
// supplies the step and includes only its own engine. With --flops it builds nothing and prints
//   flops <workload> <samples per step> <nominal GFLOP per step> <executed GFLOP per step>
// (bench/flops.h: the FLOP Ember's step runs, Winograd's transforms and reduced multiplies counted).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/flops.h"
#include "bench/workloads.h"

namespace ember::bench {

// `make` builds one training step of the workload at `batch` with the engine's math threads set to
// `threads`.
inline int step_rate_main(const char* program, int argc, char** argv,
                          const std::function<std::function<void()>(const Workload&, int threads, int batch)>& make) {
  std::string workload;
  int threads = 1, reps = 3, batch = 0;
  bool flops = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--workload" && has_value) {
      workload = argv[++i];
    } else if (a == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--batch" && has_value) {
      batch = std::atoi(argv[++i]);
    } else if (a == "--flops") {
      flops = true;
    } else {
      const bool help = a == "--help" || a == "-h";
      std::fprintf(help ? stdout : stderr, "%susage: %s --workload W [--threads N] [--reps N] [--batch N] [--flops]\n",
                   help ? "" : (std::string(program) + ": bad argument '" + a + "'\n").c_str(), program);
      return help ? 0 : 2;
    }
  }
  const Workload* w = find_workload(workload);
  if (!w || threads < 1 || reps < 1 || batch < 0 || batch > 65536) {
    std::fprintf(
        stderr,
        "%s: expected --workload one of mnist_cnn, mlp_gan, dcgan, lstm_lm, lstm_classifier, bilstm (got '%s'), "
        "--threads >= 1, --reps >= 1, --batch in [0, 65536] (0, the default: the workload's own)\n",
        program, workload.c_str());
    return 2;
  }
  // A batch other than the workload's scales its samples and FLOP per step (every layer's work is
  // linear in the batch); it keeps the steps per timed run, so a large batch runs longer.
  const int samples = batch > 0 ? batch : w->samples_per_step;
  const double gflop = w->gflop_per_step * samples / w->samples_per_step;
  if (flops) {
    const flops::Count c = flops::count(flops::layers(w->name), samples);
    // The layer list must give workloads.h's nominal figure (which rounds to three digits).
    if (c.nominal_gflop < 0.99 * gflop || c.nominal_gflop > 1.01 * gflop) {
      std::fprintf(stderr, "%s: bench/flops.h counts %.6g nominal GFLOP for %s, bench/workloads.h %.6g\n", program,
                   c.nominal_gflop, w->name, gflop);
      return 1;
    }
    std::printf("flops %s %d %.6g %.6g\n", w->name, samples, gflop, c.executed_gflop);
    return 0;
  }
  built_batch() = 0;
  const std::function<void()> step = make(*w, threads, samples);
  if (built_batch() != samples) {
    std::fprintf(stderr, "%s: the %s step was built with a batch of %d, not the %d asked for\n", program, w->name,
                 built_batch(), samples);
    return 1;
  }
  std::vector<double> rates;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < w->steps_per_run; ++s) step();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(w->steps_per_run / sec);  // run 0 warms up
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%s %d %.6g %.6g %.6g %d %.6g\n", w->name, threads, rates[rates.size() / 2], rates.front(), rates.back(),
              samples, gflop);
  return 0;
}

}  // namespace ember::bench
