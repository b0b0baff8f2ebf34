// `ember sched make-trace`: traces for planning at cluster scale (scheduler/sim/trace_gen.h), written
// as CSV that `ember sched simulate` reads: a trace repeated back to back (--tile K, each copy a
// week later), or a synthetic one drawn from a trace's jobs with Poisson arrivals (--jobs N).
#include <iostream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "scheduler/sim/trace.h"
#include "scheduler/sim/trace_gen.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {

int sched_make_trace(const std::vector<std::string>& args) {
  Flags f;
  f.add("like", "FILE", "the trace whose jobs are repeated or drawn from (CSV, as for simulate)")
      .add("tile", "K", "K copies of the trace back to back, each shifted by --shift")
      .add("shift", "S", "--tile: seconds between copies (default 604800, a week)")
      .add("jobs", "N", "a synthetic trace of N jobs drawn from --like (Poisson arrivals)")
      .add("gpus", "G", "--jobs: the cluster size the arrival rate is set for")
      .add("load", "L", "--jobs: offered load on --gpus devices (default 0.9)")
      .add("seed", "S", "--jobs: random seed (default 1)")
      .add("out", "FILE", "where to write the trace (CSV)")
      .add("help", "", "show this help");
  const std::string usage = usage_of(
      "ember sched make-trace --like FILE (--tile K [--shift S] | --jobs N --gpus G [--load L] [--seed S]) --out FILE",
      f);
  return run_leaf("ember sched make-trace", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    const std::string like_path = f.require("like"), out = f.require("out");
    if (f.has("tile") == f.has("jobs")) throw UsageError("expected one of --tile K or --jobs N");
    const std::vector<sched::JobSpec> like = sched::read_trace(like_path);
    std::vector<sched::JobSpec> trace;
    if (f.has("tile")) {
      const int copies = static_cast<int>(f.integer("tile", 1, 1, 100000));
      trace = sched::tile_trace(like, copies, f.number("shift", 604800, 0, 1e12));
    } else {
      if (!f.has("gpus")) throw UsageError("--jobs needs --gpus G, the cluster size the arrival rate is set for");
      trace = sched::synthetic_trace(
          like, f.integer("jobs", 1, 1, 1'000'000'000), static_cast<int>(f.integer("gpus", 1, 1, 100'000'000)),
          f.number("load", 0.9, 1e-6, 1e6), static_cast<uint64_t>(f.integer("seed", 1, 0, 1L << 62)));
    }
    write_file_atomic(out, sched::trace_to_csv(trace));
    std::cout << "wrote " << out << ": " << trace.size() << " jobs over "
              << (trace.back().submit - trace.front().submit) / 86400 << " days\n";
    return 0;
  });
}

}  // namespace ember::tools
