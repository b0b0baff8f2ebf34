// Reads job traces: CSV files with a header row, one job per line (the format of
// data/traces/philly_w41.csv and tiresias_60_job.csv, documented in docs/scheduler/simulator.md). Columns
// are found by name; a ColumnMap names them for CSVs that call them something else. Every
// problem is an ember::Error naming the file, the line and what was expected.
#pragma once

#include <istream>
#include <map>
#include <string>
#include <vector>

#include "scheduler/job.h"

namespace ember::sched {

// Job field -> CSV column name. Fields: id, submit, gpus, duration, estimate, priority, queue, mem,
// model.
struct ColumnMap {
  std::map<std::string, std::string> columns;
  // "submit=arrival,gpus=num_gpu": throws ember::Error on an unknown field or a malformed pair.
  static ColumnMap parse(const std::string& spec);
};

struct TraceOptions {
  ColumnMap columns;
  double time_unit = 1.0;       // seconds per unit of the trace's submit/duration/estimate columns
  bool exact_estimates = true;  // without an estimate column, the estimate is the true duration
};

std::vector<JobSpec> read_trace(const std::string& path, const TraceOptions& opt = {});
// `name` is what error messages call the source.
std::vector<JobSpec> parse_trace(std::istream& in, const std::string& name, const TraceOptions& opt = {});

}  // namespace ember::sched
