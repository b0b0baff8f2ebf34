// Traces larger than the ones shipped, for planning at cluster scale: a real week repeated back to
// back, and a synthetic trace of any size drawn from a real one's jobs. Both are deterministic
// (the synthetic one from its seed), so a run can be repeated and compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/job.h"

namespace ember::sched {

// `copies` copies of `trace`, copy k's submissions shifted by k * `shift` seconds (a week:
// 604800), in submission order; job k of copy c is named "NAME#c" (copy 0 keeps its names).
std::vector<JobSpec> tile_trace(const std::vector<JobSpec>& trace, int copies, double shift);

// The offered load of `trace` on `gpus` devices: its device-seconds of work over the devices'
// seconds in its arrival window (0 when every job arrives at once).
double offered_load(const std::vector<JobSpec>& trace, int gpus);

// `jobs` jobs whose (gang size, duration, estimate, queue) are drawn with replacement from `like`
// (its joint distribution, as it is), arriving as a Poisson process whose rate makes the offered
// load on `gpus` devices equal `load`: rate = load * gpus / E[gang size * duration]. The same
// seed gives the same trace. Throws ember::Error for an empty `like`, a job count or device count
// below 1, or a load that is not > 0.
std::vector<JobSpec> synthetic_trace(const std::vector<JobSpec>& like, int64_t jobs, int gpus, double load,
                                     uint64_t seed);

// The trace as CSV in the shipped traces' columns (job_id,submit_time,num_gpus,duration,vc, and
// estimate when any job has one), readable by read_trace.
std::string trace_to_csv(const std::vector<JobSpec>& trace);

}  // namespace ember::sched
