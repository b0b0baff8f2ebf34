// Pollux's evaluation workloads (../shared/data/pollux/workloads*/workload-N.csv): jobs arriving
// over time, each with the app it trains and the GPUs and global batch its submitter asked for.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "scheduler/elastic/app_model.h"

namespace ember::sched::elastic {

struct JobRequest {
  std::string name;
  double submit = 0;  // seconds
  std::string app;    // an AppModel's name
  int gpus = 1;       // what the submitter asked for (what a rigid policy runs it on)
  long batch = 1;     // global batch asked for
  // Declared rigid: an elastic policy runs it on exactly `gpus` GPUs at `batch` (or not at all).
  bool rigid = false;
};

// Columns `name,time,application,num_replicas,batch_size` and an optional `rigid` (0 or 1). Jobs
// of the apps in `rigid_apps` are rigid too (the artifact runs NCF at its submitted size and batch
// under every policy). Rows are sorted by time (stable). ember::Error naming the file and line for
// an unknown app, a duplicate name, GPUs < 1, or a batch outside the app's validated range.
std::vector<JobRequest> read_workload(const std::string& path, const std::map<std::string, AppModel>& apps,
                                      const std::set<std::string>& rigid_apps = {"ncf"});

}  // namespace ember::sched::elastic
