// How fast each model family runs on each device type, relative to the reference type whose
// seconds a trace's durations are (v100 in the defaults): the table a heterogeneous cluster's
// simulation and the heterogeneity-aware policy read. A job's model is its trace's `model` column
// or, without one, a family of the table chosen by a hash of the job's name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/job.h"

namespace ember::sched {

class SpeedTable {
 public:
  // Model families cnn, transformer, lstm, recommendation, gan, rl on v100 (1.0), a100, h100,
  // h200: rounded approximations of the per-GPU training-throughput ratios vendors publish for
  // such models (docs/scheduler/heterogeneous.md), not measurements of this project.
  static SpeedTable defaults();
  // CSV: a header "model,TYPE,TYPE,..." and one row per family of speeds > 0. Throws ember::Error
  // naming the file, line and what was expected.
  static SpeedTable read(const std::string& path);
  static SpeedTable parse(const std::string& text, const std::string& name);

  const std::vector<std::string>& models() const { return models_; }
  const std::vector<std::string>& types() const { return types_; }
  // Throws ember::Error naming the model or type when the table lacks it.
  double speed(const std::string& model, const std::string& type) const;
  // Throws ember::Error naming the first device type of `topo` that the table lacks.
  void check_types(const Topology& topo) const;
  // Gives every job without a model a family of the table (FNV-1a hash of its name, so the same
  // job always gets the same one); throws ember::Error for a model the table lacks.
  void assign_models(std::vector<JobSpec>& jobs) const;

 private:
  std::vector<std::string> models_, types_;
  std::map<std::string, std::vector<double>> speed_;  // model -> speed per type
};

}  // namespace ember::sched
