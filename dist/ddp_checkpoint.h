// Checkpoints of a data-parallel job. Rank 0 writes the model, the optimizers and its generators
// to <dir>/last.ckpt; every rank writes its own generators and data-loader position to
// <dir>/last.rank<R>.ckpt. The rank files are written first and rank 0's file last, after a
// barrier, so a last.ckpt always has complete rank files beside it.
//
// Resuming reads last.ckpt on every rank (the directory must be visible to every node: a shared
// file system, or a copy) and checks that the job has the world size that wrote it. With
// `allow_reshard` a different world size is accepted: the data loader's global batch order
// depends only on (seed, epoch, batch), so the global position carries over exactly; each rank
// then takes rank 0's generators, since per-rank random streams cannot be mapped onto a
// different number of ranks.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dist/comm.h"
#include "layers/checkpoint.h"

namespace ember::dist {

void save_distributed(const std::string& dir, Communicator& comm, const TrainingState& state, TrainingPosition position,
                      const std::map<std::string, std::string>& metadata = {});

struct DistributedResume {
  TrainingPosition position;
  std::map<std::string, std::string> metadata;
  bool resharded = false;  // written by a different number of ranks
};
// Loads <dir>/last.ckpt (model, optimizers) and this rank's generators; the returned position is
// the loader's global position. An ember::Error when the world size differs and !allow_reshard.
DistributedResume load_distributed(const std::string& dir, Communicator& comm, const TrainingState& state,
                                   bool allow_reshard = false);

std::string main_checkpoint_path(const std::string& dir);
std::string rank_checkpoint_path(const std::string& dir, int rank);

}  // namespace ember::dist
