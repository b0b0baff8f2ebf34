// The dashboard at `/` of the daemon's web endpoint: a page of its own (HTML, a script and a style
// sheet, served by the daemon: no CDN, it works offline) that polls /api/state every two seconds
// and draws the device grid coloured by team, the queue with waits and estimated starts, the
// teams against their quotas, a chart of utilisation and queue length over time (its own SVG),
// and each job's progress. Read-only: it shows what `ember sched status` shows any user (no
// commands, paths or logs of anyone's jobs).
#pragma once

#include <string>

#include "scheduler/daemon/progress.h"
#include "scheduler/daemon/snapshot.h"

namespace ember::sched {

// /api/state: the snapshot as JSON (the page's only input; the shape is documented in
// docs/scheduler/operators.md).
std::string render_state_json(const DaemonSnapshot& s, ProgressReader& progress, double now);

// The page's files (scheduler/daemon/dashboard/, compiled in by cmake/EmbedFiles.cmake).
const std::string& dashboard_html();
const std::string& dashboard_js();
const std::string& dashboard_css();

}  // namespace ember::sched
