#include "scheduler/sim/trace_gen.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/error.h"

namespace ember::sched {

std::vector<JobSpec> tile_trace(const std::vector<JobSpec>& trace, int copies, double shift) {
  EMBER_CHECK(copies >= 1, "tile: expected at least 1 copy, got ", copies);
  EMBER_CHECK(shift >= 0, "tile: expected a shift of >= 0 seconds, got ", shift);
  std::vector<JobSpec> out;
  out.reserve(trace.size() * static_cast<size_t>(copies));
  for (int c = 0; c < copies; ++c)
    for (const JobSpec& j : trace) {
      JobSpec k = j;
      k.submit += c * shift;
      if (c > 0) k.name.append("#").append(std::to_string(c));
      out.push_back(std::move(k));
    }
  std::stable_sort(out.begin(), out.end(), [](const JobSpec& a, const JobSpec& b) { return a.submit < b.submit; });
  return out;
}

double offered_load(const std::vector<JobSpec>& trace, int gpus) {
  if (trace.empty() || gpus <= 0) return 0;
  double first = trace.front().submit, last = first, work = 0;
  for (const JobSpec& j : trace) {
    first = std::min(first, j.submit);
    last = std::max(last, j.submit);
    work += j.gpus * std::max(0.0, j.duration);
  }
  return last > first ? work / (gpus * (last - first)) : 0;
}

std::vector<JobSpec> synthetic_trace(const std::vector<JobSpec>& like, int64_t jobs, int gpus, double load,
                                     uint64_t seed) {
  EMBER_CHECK(!like.empty(), "synthetic trace: the trace to draw jobs from is empty");
  EMBER_CHECK(jobs >= 1, "synthetic trace: expected at least 1 job, got ", jobs);
  EMBER_CHECK(gpus >= 1, "synthetic trace: expected at least 1 device, got ", gpus);
  EMBER_CHECK(load > 0, "synthetic trace: expected an offered load > 0, got ", load);
  double mean_work = 0;
  for (const JobSpec& j : like) mean_work += j.gpus * std::max(0.0, j.duration);
  mean_work /= static_cast<double>(like.size());
  EMBER_CHECK(mean_work > 0, "synthetic trace: the jobs to draw from have no work (every duration is 0)");
  const double rate = load * gpus / mean_work;  // arrivals per second
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<size_t> pick(0, like.size() - 1);
  std::vector<JobSpec> out;
  out.reserve(static_cast<size_t>(jobs));
  double t = 0;
  for (int64_t i = 0; i < jobs; ++i) {
    const JobSpec& src = like[pick(rng)];
    JobSpec j;
    j.name = std::to_string(i);
    j.name.insert(j.name.begin(), 's');  // not "s" + ...: GCC 12 warns falsely (-Wrestrict)
    j.submit = t;
    j.gpus = src.gpus;
    j.mem_per_gpu = src.mem_per_gpu;
    j.duration = src.duration;
    j.estimate = src.estimate;
    j.queue = src.queue;
    out.push_back(std::move(j));
    t += gap(rng);
  }
  return out;
}

std::string trace_to_csv(const std::vector<JobSpec>& trace) {
  const bool estimates = std::any_of(trace.begin(), trace.end(),
                                     [](const JobSpec& j) { return j.estimate >= 0 && j.estimate != j.duration; });
  std::string out =
      estimates ? "job_id,submit_time,num_gpus,duration,estimate,vc\n" : "job_id,submit_time,num_gpus,duration,vc\n";
  char buf[128];
  for (const JobSpec& j : trace) {
    EMBER_CHECK(
        j.name.find_first_of(",\n\r") == std::string::npos && j.queue.find_first_of(",\n\r") == std::string::npos,
        "trace: job '", j.name, "' (queue '", j.queue, "') has a comma or line break, which CSV cannot hold");
    // %.17g: the times read back exactly.
    std::snprintf(buf, sizeof(buf), ",%.17g,%d,%.17g", j.submit, j.gpus, j.duration);
    out += j.name;
    out += buf;
    if (estimates) {
      std::snprintf(buf, sizeof(buf), ",%.17g", j.estimate);
      out += buf;
    }
    out += ",";
    out += j.queue;
    out += "\n";
  }
  return out;
}

}  // namespace ember::sched
