#include "dist/ddp_checkpoint.h"

#include <filesystem>

#include "core/error.h"

namespace ember::dist {

std::string main_checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "last.ckpt").string();
}

std::string rank_checkpoint_path(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / ("last.rank" + std::to_string(rank) + ".ckpt")).string();
}

void save_distributed(const std::string& dir, Communicator& comm, const TrainingState& state, TrainingPosition position,
                      const std::map<std::string, std::string>& metadata) {
  EMBER_CHECK(state.model, "save_distributed: the training state has no model");
  position.world_size = comm.size();
  position.rank = comm.rank();
  std::filesystem::create_directories(dir);
  CheckpointContents mine;
  for (const auto& [name, gen] : state.generators) mine.generators.emplace_back(name, gen->state());
  mine.position = position;
  mine.metadata = metadata;
  write_checkpoint(rank_checkpoint_path(dir, comm.rank()), mine);
  comm.barrier("checkpoint rank files")->wait();
  if (comm.rank() == 0) {
    auto meta = metadata;
    meta["world_size"] = std::to_string(comm.size());
    save_training(main_checkpoint_path(dir), state, position, meta);
  }
  // Nobody goes on (and possibly writes the next checkpoint) before last.ckpt is complete.
  comm.barrier("checkpoint written")->wait();
}

DistributedResume load_distributed(const std::string& dir, Communicator& comm, const TrainingState& state,
                                   bool allow_reshard) {
  std::string main = main_checkpoint_path(dir);
  EMBER_CHECK(std::filesystem::exists(main), "load_distributed: no checkpoint at '", main, "'");
  TrainingPosition pos = read_checkpoint(main).position;
  bool reshard = pos.world_size != comm.size();
  EMBER_CHECK(!reshard || allow_reshard, "load_distributed: '", main, "' was written by a job of ", pos.world_size,
              " ranks, this job has ", comm.size(),
              "; start it with the same number of ranks, or allow resharding (--reshard) to continue with the "
              "global batch order kept and rank 0's random state on every rank");
  DistributedResume out;
  auto [p, meta] = load_training(main, state);
  out.position = p;
  out.metadata = meta;
  out.resharded = reshard;
  if (!reshard) {
    std::string own = rank_checkpoint_path(dir, comm.rank());
    EMBER_CHECK(std::filesystem::exists(own), "load_distributed: '", main, "' has no rank file '", own,
                "' beside it (the checkpoint directory is incomplete)");
    CheckpointContents c = read_checkpoint(own);
    EMBER_CHECK(c.position.rank == comm.rank() && c.position.world_size == comm.size(), "load_distributed: '", own,
                "' belongs to rank ", c.position.rank, " of ", c.position.world_size, ", expected rank ", comm.rank(),
                " of ", comm.size());
    for (const auto& [name, gen] : state.generators) {
      bool found = false;
      for (const auto& [n, s] : c.generators)
        if (n == name) {
          gen->set_state(s);
          found = true;
        }
      EMBER_CHECK(found, "load_distributed: '", own, "' has no generator named '", name, "'");
    }
    out.position.loader_epoch = c.position.loader_epoch;
    out.position.loader_batch = c.position.loader_batch;
  }
  comm.barrier("checkpoint loaded")->wait();
  return out;
}

}  // namespace ember::dist
