// The main of bench/step_rate (Ember) and bench/torch_ref (libtorch): workloads of
// bench/workloads.h at one thread count, timed in a process of their own, each printed as one line
//   <workload> <threads> <median steps/s> <min> <max> <samples per step> <GFLOP per step>
// over --reps timed runs of the workload's steps after one warm-up run. --workload takes one name
// or several, comma-separated, timed one after the other (the GPU check runs all six per process:
// a process start costs seconds there). --run-seconds S lengthens a timed run to about S seconds
// when the workload's own step count is shorter (a GPU step can take under a millisecond; the
// count comes from the warm-up run). Plain C++: each side supplies the step and includes only its
// own engine. With --flops it builds nothing and prints
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

// Splits "a,b,c" into its names (an empty name stays, so that the caller refuses it).
inline std::vector<std::string> split_workloads(const std::string& list) {
  std::vector<std::string> names;
  size_t start = 0;
  for (size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1)
    names.push_back(list.substr(start, comma - start));
  names.push_back(list.substr(start));
  return names;
}

// Steps per timed run: the workload's own, or enough for `run_seconds` at the warm-up's pace.
inline int steps_for(int own, double run_seconds, double warmup_sec_per_step) {
  if (run_seconds <= 0 || warmup_sec_per_step <= 0) return own;
  const double want = run_seconds / warmup_sec_per_step;
  return want > own ? static_cast<int>(std::min(want, 1e6)) : own;
}

// Times one workload and prints its line (or, with `flops`, its FLOP line).
inline int time_workload(const char* program, const Workload& w, int threads, int reps, int batch, double run_seconds,
                         bool flops,
                         const std::function<std::function<void()>(const Workload&, int threads, int batch)>& make,
                         const std::function<void()>& sync) {
  // A batch other than the workload's scales its samples and FLOP per step (every layer's work is
  // linear in the batch); it keeps the steps per timed run, so a large batch runs longer.
  const int samples = batch > 0 ? batch : w.samples_per_step;
  const double gflop = w.gflop_per_step * samples / w.samples_per_step;
  if (flops) {
    const flops::Count c = flops::count(flops::layers(w.name), samples);
    // The layer list must give workloads.h's nominal figure (which rounds to three digits).
    if (c.nominal_gflop < 0.99 * gflop || c.nominal_gflop > 1.01 * gflop) {
      std::fprintf(stderr, "%s: bench/flops.h counts %.6g nominal GFLOP for %s, bench/workloads.h %.6g\n", program,
                   c.nominal_gflop, w.name, gflop);
      return 1;
    }
    std::printf("flops %s %d %.6g %.6g\n", w.name, samples, gflop, c.executed_gflop);
    return 0;
  }
  built_batch() = 0;
  const std::function<void()> step = make(w, threads, samples);
  if (built_batch() != samples) {
    std::fprintf(stderr, "%s: the %s step was built with a batch of %d, not the %d asked for\n", program, w.name,
                 built_batch(), samples);
    return 1;
  }
  std::vector<double> rates;
  int steps = w.steps_per_run;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) step();
    if (sync) sync();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(steps / sec);  // run 0 warms up
    if (r == 0) steps = steps_for(w.steps_per_run, run_seconds, sec / steps);
  }
  std::sort(rates.begin(), rates.end());
  std::printf("%s %d %.6g %.6g %.6g %d %.6g\n", w.name, threads, rates[rates.size() / 2], rates.front(), rates.back(),
              samples, gflop);
  std::fflush(stdout);  // a caller's timeout keeps the workloads already timed
  return 0;
}

// `make` builds one training step of the workload at `batch` with the engine's math threads set to
// `threads`. `sync`, when given, waits for the device's queued work: a timed run ends with it.
// `engine_usage`: the engine's own flags (taken out of argv before), for the usage line.
inline int step_rate_main(const char* program, int argc, char** argv,
                          const std::function<std::function<void()>(const Workload&, int threads, int batch)>& make,
                          const std::function<void()>& sync = nullptr, const char* engine_usage = "") {
  std::string workload;
  int threads = 1, reps = 3, batch = 0;
  double run_seconds = 0;
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
    } else if (a == "--run-seconds" && has_value) {
      run_seconds = std::atof(argv[++i]);
    } else if (a == "--flops") {
      flops = true;
    } else {
      const bool help = a == "--help" || a == "-h";
      std::fprintf(
          help ? stdout : stderr,
          "%susage: %s --workload W[,W...] [--threads N] [--reps N] [--batch N] [--run-seconds S] [--flops]%s\n",
          help ? "" : (std::string(program) + ": bad argument '" + a + "'\n").c_str(), program, engine_usage);
      return help ? 0 : 2;
    }
  }
  std::vector<const Workload*> chosen;
  for (const std::string& name : split_workloads(workload)) chosen.push_back(find_workload(name));
  const bool known = std::find(chosen.begin(), chosen.end(), nullptr) == chosen.end();
  if (!known || threads < 1 || reps < 1 || batch < 0 || batch > 65536 || !(run_seconds >= 0 && run_seconds <= 60)) {
    std::fprintf(stderr,
                 "%s: expected --workload one or more (comma-separated) of mnist_cnn, mlp_gan, dcgan, lstm_lm, "
                 "lstm_classifier, bilstm (got '%s'), --threads >= 1, --reps >= 1, --batch in [0, 65536] (0, the "
                 "default: the workload's own), --run-seconds in [0, 60]\n",
                 program, workload.c_str());
    return 2;
  }
  for (const Workload* w : chosen) {
    const int rc = time_workload(program, *w, threads, reps, batch, run_seconds, flops, make, sync);
    if (rc != 0) return rc;
  }
  return 0;
}

}  // namespace ember::bench
