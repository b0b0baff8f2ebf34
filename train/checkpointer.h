// The checkpoints of a training run: a TrainingState, the loader's position and, mid-epoch, the
// epoch's running sums, as checkpoint-dir/last.ckpt, written atomically (layers/checkpoint.h);
// in a data-parallel job last.ckpt and one file per rank beside it (parallel_job.h). Resuming
// checks the settings the checkpoint depends on (check_resume_settings) and puts the loader
// back where the checkpoint left it.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "data/dataloader.h"
#include "layers/checkpoint.h"
#include "train/parallel_job.h"
#include "train/training.h"

namespace ember::train {

class Checkpointer {
 public:
  // `meta` goes into every checkpoint; its "flag.*" and "setting.*" entries must match on resume
  // (check_resume_settings). `job`: the program takes --data-parallel (mnist_cnn): its
  // checkpoints are the job's, and a data-parallel checkpoint resumed by one process needs --reshard.
  Checkpointer(std::string dir, TrainingState state, data::DataLoader& loader, std::map<std::string, std::string> meta,
               ParallelJob* job = nullptr)
      : dir_(std::move(dir)), state_(std::move(state)), loader_(loader), meta_(std::move(meta)), job_(job) {}

  std::string last() const { return (std::filesystem::path(dir_) / "last.ckpt").string(); }
  const std::string& dir() const { return dir_; }
  const TrainingState& state() const { return state_; }
  const std::map<std::string, std::string>& meta() const { return meta_; }

  // --resume: "" starts fresh, "auto" resumes from checkpoint-dir/last.ckpt when it exists, any
  // other value is a checkpoint path that must exist. Returns the position to continue from.
  TrainingPosition resume(const std::string& flag);
  // An elastic job (meta "elastic.batch-size", CommonFlags::elastic) resumed at another global
  // batch: the loader's position converted, and the optimizers' learning rate set to this run's.
  void resume_elastic(const std::map<std::string, std::string>& file, TrainingPosition& pos);
  bool resumed() const { return resumed_; }
  // The checkpoint resume() loaded (empty before, or when it started fresh).
  const std::string& resumed_from() const { return resumed_from_; }
  // The running sums of the epoch the checkpoint stopped in (empty at an epoch's start, or for
  // an older checkpoint); handed out once, for the first epoch after the resume.
  RunningSums take_running() { return std::exchange(running_, {}); }

  // The checkpoint that resume(flag) loads, or nullopt when it starts fresh (so that a caller can
  // check what lies beside the checkpoint, such as a vocabulary, before loading it).
  std::optional<std::string> resume_path(const std::string& flag) const;

  // After SIGINT/SIGTERM: writes the checkpoint, says so, and returns kPreemptedExit for main to
  // return (the scheduler resumes the job later with --resume auto).
  // Without a checkpoint folder nothing can be kept, and the message says so and how to keep the
  // next run's progress (the status alone once let a user believe the run could be resumed).
  int preempted(const TrainingPosition& pos, const RunningSums& running = {});

  // Writes last.ckpt (atomically) with the loader's current position and, mid-epoch, the epoch's
  // running sums; nothing without a dir.
  void save(const TrainingPosition& pos, const RunningSums& running = {});

 private:
  // The ranks of a parallel job over several hosts each look for last.ckpt in --checkpoint-dir as
  // their host sees it: a node-local folder has it on rank 0's host only. Every rank refuses that
  // (a collective), rather than some resuming while the others start afresh and the job stalls.
  void check_every_rank_sees(bool found);
  // The checkpoint at `path`: the position, its metadata and whether it came from another world size.
  std::tuple<TrainingPosition, std::map<std::string, std::string>, bool> load(const std::string& flag,
                                                                              const std::string& path);

  std::string dir_;
  TrainingState state_;
  data::DataLoader& loader_;
  std::map<std::string, std::string> meta_;
  ParallelJob* job_;
  RunningSums running_;
  bool resumed_ = false;
  std::string resumed_from_;
};

}  // namespace ember::train
