// `ember sched train-policy`: trains the learned scheduling policy by policy gradient in the
// simulator (scheduler/learned/train_policy.h) and writes its network as a checkpoint, with a
// progress bar, and the learning curve as CSV and SVG.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/cpu_capability.h"
#include "core/error.h"
#include "core/parallel.h"
#include "scheduler/learned/train_policy.h"
#include "scheduler/sim/trace.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {
namespace {

using namespace ember::sched;

void bar(const learned::CurvePoint& p, int total) {
  const int width = 30, done = p.iteration * width / total;
  if (p.iteration == 0) {
    std::fprintf(stderr, "untrained (the Gittins ranking): validation %.0f s (gittins %.0f, las %.0f)\n", p.eval,
                 p.eval_gittins, p.eval_las);
    return;
  }
  std::fprintf(stderr, "\r[%s%s] %d/%d  rollouts %.0f s  gittins %.0f s  las %.0f s", std::string(done, '#').c_str(),
               std::string(width - done, '.').c_str(), p.iteration, total, p.rollout_mean, p.gittins, p.las);
  if (p.eval >= 0)
    std::fprintf(stderr, "  validation %.0f s (gittins %.0f)\n", p.eval, p.eval_gittins);
  else if (p.iteration == total)
    std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

int sched_train_policy(const std::vector<std::string>& args) {
  Flags f;
  f.add("trace", "FILE", "job trace (CSV, see docs/scheduler/simulator.md)")
      .add("out", "FILE", "where to write the trained network (a checkpoint)")
      .add("gpus", "N", "devices in the simulated cluster (default 256)")
      .add("node-gpus", "K", "devices per node (default 0: one flat pool)")
      .add("preempt-cost", "S", "seconds of work lost per preemption (default 0)")
      .add("train-until", "S", "train on the jobs submitted before S seconds (default 432000: five days)")
      .add("window", "JOBS", "consecutive jobs per training window (default 800)")
      .add("rollouts", "K", "simulations per window, the baseline of each other (default 4)")
      .add("iterations", "N", "policy-gradient steps (default 150)")
      .add("lr", "X", "Adam learning rate (default 0.003)")
      .add("seed", "N", "seed of the network and the exploration (default 1)")
      .add("temperature", "T", "exploration: orders drawn from Plackett-Luce of score / T (default 3)")
      .add("eval-every", "N", "evaluate on the validation windows every N iterations (default 10)")
      .add("val-windows", "K", "validate on the last K windows of the training part (default 4)")
      .add("csv", "FILE", "write the learning curve as CSV")
      .add("svg", "FILE", "write the learning curve as SVG")
      .add("help", "", "show this help");
  const std::string usage = usage_of("ember sched train-policy --trace FILE --out FILE [flags]", f) +
                            "\nThe network is trained on one thread, so that a seed gives the same weights bit for "
                            "bit at one CPU capability level.\n";
  return run_leaf("ember sched train-policy", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    const std::string trace_path = f.require("trace"), out = f.require("out");
    learned::TrainPolicyOptions o;
    o.gpus = static_cast<int>(f.integer("gpus", o.gpus, 1, 10'000'000));
    o.node_gpus = static_cast<int>(f.integer("node-gpus", o.node_gpus, 0, 10'000'000));
    o.preempt_cost = f.number("preempt-cost", o.preempt_cost, 0, 1e9);
    o.train_until = f.number("train-until", o.train_until, 0, 1e12);
    o.window_jobs = static_cast<int>(f.integer("window", o.window_jobs, 2, 1'000'000));
    o.rollouts = static_cast<int>(f.integer("rollouts", o.rollouts, 2, 1024));
    o.iterations = static_cast<int>(f.integer("iterations", o.iterations, 1, 1'000'000));
    o.lr = f.number("lr", o.lr, 1e-9, 10);
    o.seed = static_cast<uint64_t>(f.integer("seed", 1, 0, 1L << 62));
    o.eval_every = static_cast<int>(f.integer("eval-every", o.eval_every, 1, 1'000'000));
    o.temperature = f.number("temperature", o.temperature, 1e-6, 1e6);
    o.val_windows = static_cast<int>(f.integer("val-windows", o.val_windows, 1, 1'000'000));
    std::vector<JobSpec> trace = read_trace(trace_path);
    set_num_threads(1);
    std::ostringstream cmd;
    cmd << "ember sched train-policy";
    for (const std::string& a : args) cmd << " " << a;
    std::cerr << "training on " << trace_path << " at CPU level " << cpu_capability_name(cpu_capability())
              << ", one thread\n";
    learned::TrainResult r =
        learned::train_policy(trace, o, [&](const learned::CurvePoint& p) { bar(p, o.iterations); });
    learned::save_policy_net(*r.net, out,
                             {{"command", cmd.str()},
                              {"best_iteration", std::to_string(r.best_iteration)},
                              {"cpu_level", cpu_capability_name(cpu_capability())},
                              {"trace", trace_path}});
    if (f.has("csv")) write_file_atomic(f.str("csv"), learned::curve_csv(r.curve));
    if (f.has("svg")) write_file_atomic(f.str("svg"), learned::curve_svg(r.curve, "learned policy: " + trace_path));
    std::cout << "wrote " << out << ": the network of iteration " << r.best_iteration
              << ", best on the validation windows (" << r.best_eval << " s average JCT; gittins "
              << r.curve.front().eval_gittins << " s, las " << r.curve.front().eval_las << " s)\n";
    return 0;
  });
}

}  // namespace ember::tools
