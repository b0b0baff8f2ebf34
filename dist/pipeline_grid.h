// Pipeline x data parallelism ("2D", as DeepSpeed and Megatron arrange it) from one launch:
// `ember launch -n 4 -- PROGRAM --pipeline 2` runs 2 stages x 2 replicas. World rank r holds stage
// r / replicas of replica r % replicas, so the replicas of one stage are neighbours (on one node
// their gradient all-reduce stays in shared memory; a multi-node launch keeps it inside a node
// while activations, which are smaller, cross nodes). Each replica is a whole pipeline over its
// own stage ranks; each stage's replicas average their gradients (DistributedDataParallel over a
// communicator split from the world), so a step trains on replicas x the per-replica batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/comm.h"

namespace ember::dist {

struct PipelineGrid {
  int stages = 1, replicas = 1;
  int stage = 0, replica = 0;
  // This replica's pipeline: the world rank of each stage (PipelineOptions::stage_ranks).
  std::vector<int> stage_ranks;
  // This stage's replicas, for PipelineOptions::data_parallel; null with one replica.
  std::unique_ptr<Communicator> replicas_comm;
  // "2 stages x 2 replicas: this rank is stage 1 of replica 0"
  std::string describe() const;
};

// A collective of `world` (it splits it when replicas > 1). `stages` must divide world.size().
PipelineGrid make_pipeline_grid(Communicator& world, int stages);

}  // namespace ember::dist
