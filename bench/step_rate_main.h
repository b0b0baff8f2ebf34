// The main of bench/step_rate (Ember) and bench/torch_ref (libtorch): one workload of
// bench/workloads.h at one thread count, timed in a process of its own, printed as one line
//   <workload> <threads> <median steps/s> <min> <max> <samples per step> <GFLOP per step>
// over --reps timed runs of the workload's steps after one warm-up run. Plain C++: each side
// supplies the step and includes only its own engine.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/workloads.h"

namespace ember::bench {

// `make` builds one training step of the workload with the engine's math threads set to `threads`.
inline int step_rate_main(const char* program, int argc, char** argv,
                          const std::function<std::function<void()>(const Workload&, int threads)>& make) {
  std::string workload;
  int threads = 1, reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--workload" && has_value) {
      workload = argv[++i];
    } else if (a == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else {
      const bool help = a == "--help" || a == "-h";
      std::fprintf(help ? stdout : stderr, "%susage: %s --workload W [--threads N] [--reps N]\n",
                   help ? "" : (std::string(program) + ": bad argument '" + a + "'\n").c_str(), program);
      return help ? 0 : 2;
    }
  }
  const Workload* w = find_workload(workload);
  if (!w || threads < 1 || reps < 1) {
    std::fprintf(
        stderr,
        "%s: expected --workload one of mnist_cnn, mlp_gan, dcgan, lstm_lm, lstm_classifier, bilstm (got '%s'), "
        "--threads >= 1, --reps >= 1\n",
        program, workload.c_str());
    return 2;
  }
  const std::function<void()> step = make(*w, threads);
  std::vector<double> rates;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < w->steps_per_run; ++s) step();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(w->steps_per_run / sec);  // run 0 warms up
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%s %d %.6g %.6g %.6g %d %.6g\n", w->name, threads, rates[rates.size() / 2], rates.front(), rates.back(),
              w->samples_per_step, w->gflop_per_step);
  return 0;
}

}  // namespace ember::bench
