#include "scheduler/elastic/workload.h"

#include <algorithm>

#include "core/error.h"
#include "scheduler/elastic/csv_table.h"

namespace ember::sched::elastic {

std::vector<JobRequest> read_workload(const std::string& path, const std::map<std::string, AppModel>& apps,
                                      const std::set<std::string>& rigid_apps) {
  const CsvTable t = read_csv_table(path);
  const int nc = t.column("name"), tc = t.column("time"), ac = t.column("application");
  const int rc = t.column("num_replicas"), bc = t.column("batch_size");
  int rigid_col = -1;
  for (size_t i = 0; i < t.header.size(); ++i)
    if (t.header[i] == "rigid") rigid_col = static_cast<int>(i);
  std::vector<JobRequest> jobs;
  std::map<std::string, int> seen;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    JobRequest j;
    j.name = t.text(i, nc);
    EMBER_CHECK(!j.name.empty(), path, ":", t.lines[i], ": column 'name' is empty");
    EMBER_CHECK(seen.emplace(j.name, t.lines[i]).second, path, ":", t.lines[i], ": job name '", j.name,
                "' already used on line ", seen[j.name]);
    j.submit = t.number(i, tc, 0);
    j.app = t.text(i, ac);
    const auto app = apps.find(j.app);
    EMBER_CHECK(app != apps.end(), path, ":", t.lines[i], ": unknown application '", j.app,
                "' (no such folder in the traces)");
    const long gpus = t.integer(i, rc, 1);  // checked before it is narrowed to an int
    EMBER_CHECK(gpus <= 4096, path, ":", t.lines[i], ": num_replicas ", gpus, " is more than 4096");
    j.gpus = static_cast<int>(gpus);
    j.batch = t.integer(i, bc, 1);
    const AppLimits& l = app->second.limits();
    EMBER_CHECK(j.batch >= l.init_batch && j.batch <= l.max_batch, path, ":", t.lines[i], ": batch_size ", j.batch,
                " of ", j.app, " is outside its validated range [", l.init_batch, ", ", l.max_batch, "]");
    j.rigid = rigid_apps.count(j.app) > 0 || (rigid_col >= 0 && t.integer(i, rigid_col, 0) != 0);
    if (rigid_col >= 0)
      EMBER_CHECK(t.integer(i, rigid_col, 0) <= 1, path, ":", t.lines[i], ": column 'rigid': expected 0 or 1");
    jobs.push_back(std::move(j));
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const JobRequest& a, const JobRequest& b) { return a.submit < b.submit; });
  return jobs;
}

}  // namespace ember::sched::elastic
