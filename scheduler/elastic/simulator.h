// The round-based simulator of elastic jobs (Pollux's model of a cluster, docs/scheduler/elastic.md):
// every `interval` seconds the policy gives each active job its GPUs (a node per GPU) and its
// per-GPU batch; a job whose GPUs change restarts from its checkpoint, `restart_delay` seconds
// without progress; in between each job progresses at its goodput, counted in steps at its app's
// initial batch (AppModel), and finishes when that reaches its measured run's progress.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/elastic/app_model.h"
#include "scheduler/elastic/workload.h"
#include "scheduler/policy.h"  // PolicyParams

namespace ember::sched::elastic {

struct SimConfig {
  int nodes = 16;  // the artifact's cluster: 16 nodes of 4 GPUs
  int gpus_per_node = 4;
  double interval = 60;       // seconds between scheduling rounds
  double restart_delay = 30;  // seconds a (re)started job makes no progress
};

struct EJob {
  int id = 0;  // index in the workload
  JobRequest req;
  const AppModel* app = nullptr;
  double progress = 0;  // steps at the app's initial batch
  int epoch = 0;
  std::vector<int> alloc;  // node of each GPU held; empty: none
  BatchConfig batch;
  double restart_left = 0;  // seconds of the current restart still to wait
  double attained = 0;      // GPU-seconds held
  int restarts = -1;        // reallocations after the first start
  double finish = -1;
  int max_gpus = 0;                                    // most GPUs it has held
  double held_time = 0, gpu_time = 0, batch_time = 0;  // seconds holding GPUs, and integrals

  int gpus() const { return static_cast<int>(alloc.size()); }
  Shape shape() const;  // GPUs per node, in the order of alloc
  // Progress per second on `shape` at `cfg` in its current epoch (0 without GPUs).
  double goodput(const Shape& shape, const BatchConfig& cfg) const;
};

struct RoundState {
  double now = 0;
  const SimConfig* config = nullptr;
  std::vector<const EJob*> active;  // submitted, unfinished, in workload order
};

struct Assignment {
  std::vector<int> nodes;  // empty: no GPUs
  BatchConfig batch;
};

class ElasticPolicy {
 public:
  virtual ~ElasticPolicy() = default;
  virtual std::string name() const = 0;
  // One assignment per active job, in RoundState::active's order.
  virtual std::vector<Assignment> decide(const RoundState& s) = 0;
};

struct ElasticJobResult {
  std::string name, app;
  double submit = 0, finish = 0;
  double mean_gpus = 0, mean_batch = 0;  // over the time it held GPUs
  int restarts = 0;
  double jct() const { return finish - submit; }
};

struct ElasticResult {
  std::string policy;
  std::vector<ElasticJobResult> jobs;
  double avg_jct = 0, p99_jct = 0, makespan = 0;
  double utilisation = 0;  // GPU-seconds held / (GPUs x makespan)
  double mean_gpus = 0, mean_batch = 0, mean_restarts = 0;
  long rounds = 0;
  double decide_max_s = 0, decide_mean_s = 0;  // host time of the policy's decisions
};

// Runs the workload to the end. ember::Error for an invalid assignment (naming the policy, job
// and why) and for a policy that leaves jobs without GPUs on an idle cluster for 1,000 rounds.
ElasticResult simulate_elastic(const std::vector<JobRequest>& workload, const std::map<std::string, AppModel>& apps,
                               ElasticPolicy& policy, const SimConfig& cfg = {});

// The elastic registry: each policy's one line (registry.cpp here), built by name with
// `name.key=value` parameters as the rigid policies are (scheduler/registry.h).
struct ElasticEntry {
  std::string name;
  std::unique_ptr<ElasticPolicy> (*make)(const PolicyParams&) = nullptr;
  bool elastic = false;  // chooses GPUs and batch (false: runs the submitted ones)
};
const std::vector<ElasticEntry>& elastic_registry();
std::unique_ptr<ElasticPolicy> make_elastic_policy(const std::string& name, const PolicyParams& params = {});

}  // namespace ember::sched::elastic
