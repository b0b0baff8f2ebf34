// Jobs' progress as they report it: a line of the job's own log, which Ember's trainers print when
// the daemon runs them (EMBER_JOB_ID set), at most every few seconds and at each epoch's end:
//   ember-progress epoch=3 epochs=10 step=1200 loss=0.4123 samples_per_s=5230.1
// (keys in any order; epoch and step required, the rest optional; an elastic job adds batch=,
// steps_per_s=, noise_scale= and sync_s=; a line of rank 0 under `ember launch` may start "[rank 0] "). The log is the
// one file every job already has, that the daemon can read whoever the job runs as, under either backend; the daemon
// reads its tail only, and only when it grew. A job can only misreport its own progress.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "job.pb.h"

namespace ember::sched {

inline constexpr std::string_view kProgressPrefix = "ember-progress ";
inline constexpr std::string_view kRankZeroPrefix = "[rank 0] ";
// The daemon looks this far back from the end of a log for the latest report.
inline constexpr size_t kProgressTailBytes = 64 * 1024;

// One line (without its newline); nullopt when it is not a progress report or one that does not
// parse (a job's log is free text: a bad line is ignored, not an error of the daemon's).
std::optional<proto::JobProgress> parse_progress_line(std::string_view line);

// The latest report in the last kProgressTailBytes of `text`.
std::optional<proto::JobProgress> latest_progress(std::string_view text);

// The latest report of each log, re-read only when the log's size or time changed. One per
// thread: it is not synchronised.
class ProgressReader {
 public:
  std::optional<proto::JobProgress> read(const std::string& log_path);

 private:
  struct Entry {
    off_t size = -1;
    long long mtime_ns = 0;
    std::optional<proto::JobProgress> progress;
  };
  std::map<std::string, Entry> cache_;
};

}  // namespace ember::sched
