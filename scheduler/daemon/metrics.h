// /metrics: a daemon snapshot in Prometheus's text exposition format (version 0.0.4), named by
// Prometheus's conventions: the ember_sched_ prefix, base units (seconds, devices), _total on
// counters, one label set per series. docs/scheduler/operators.md lists every metric.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "scheduler/daemon/progress.h"
#include "scheduler/daemon/snapshot.h"

namespace ember::sched {

inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// `progress` reads the jobs' reports from their logs; `http` is the endpoint's own count of
// answers by (path, status); `now` is the time the running jobs' run times are measured to.
std::string render_metrics(const DaemonSnapshot& s, ProgressReader& progress,
                           const std::map<std::pair<std::string, int>, long long>& http, double now);

// A label value escaped as the format wants (backslash, double quote, newline).
std::string prometheus_label(const std::string& v);
// A sample value: shortest round-trip decimal, "+Inf", "-Inf" or "NaN".
std::string prometheus_number(double v);

}  // namespace ember::sched
