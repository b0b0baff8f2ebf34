// Turns simulation results into what `ember sched simulate` prints and writes: a text table (with
// each metric's ratio to a baseline row when comparing policies), a JSON list, a CSV table and an
// SVG of the JCT distributions. Files are written whole or not at all.
#pragma once

#include <string>
#include <vector>

#include "scheduler/sim/simulator.h"

namespace ember::sched {

// One result: a block of "metric: value" lines.
std::string format_summary(const SimResult& r);
// One row per result; when `baseline` >= 0, each cell also shows value / baseline's value. When
// `yardstick` >= 0 (the clairvoyant SRSF when comparing), two more columns give the average and p99
// JCT as ratios to that row, the measure of how close a policy that lacks durations comes.
std::string format_table(const std::vector<SimResult>& rs, int baseline = -1, int yardstick = -1);
// Per team (rows) its share, demand, jobs and alone JCT, and each result's rho (columns), for the
// results that carry fairness; empty when none does.
std::string format_teams(const std::vector<SimResult>& rs);
std::string to_json(const std::vector<SimResult>& rs);
// `s` as a JSON string literal, quotes included (`ember predict --format json` writes with it too).
std::string json_string(const std::string& s);
std::string to_csv(const std::vector<SimResult>& rs);
// Empirical CDF of JCT per result on a log time axis.
std::string to_svg(const std::vector<SimResult>& rs, const std::string& title);

}  // namespace ember::sched
