#include "train/checkpointer.h"

#include <cstdio>

#include "core/atomic_file.h"

namespace ember::train {

TrainingPosition Checkpointer::resume(const std::string& flag) {
  // A run killed while writing into its folder (kill -9, a power cut) leaves the temporary file
  // of that write (a checkpoint, the model, a sample grid). A one-process run is the folder's
  // only writer now, so they go; the ranks of a parallel job share the folder, and one rank's
  // cleaning could remove another's write in progress, so there they stay.
  if (!dir_.empty() && !(job_ && job_->active())) remove_stale_temporaries(dir_);
  const std::optional<std::string> found = resume_path(flag);
  if (!found) {
    if (flag == "auto") std::printf("No checkpoint at %s yet: starting from scratch.\n", last().c_str());
    return {};
  }
  const std::string& path = *found;
  auto [pos, file_meta, resharded] = load(flag, path);
  check_resume_settings(path, file_meta, meta_);
  loader_.set_position({pos.loader_epoch, pos.loader_batch});
  pos.epoch = pos.loader_epoch;
  if (pos.loader_batch > 0) running_ = get_running(file_meta);
  resumed_ = true;
  resumed_from_ = path;
  print_resumed(path, pos, loader_.batches_per_epoch(), resharded ? " (resharded to a new number of ranks)" : "");
  return pos;
}

std::optional<std::string> Checkpointer::resume_path(const std::string& flag) const {
  if (flag.empty()) return std::nullopt;
  EMBER_CHECK(flag != "auto" || !dir_.empty(), "--resume auto needs --checkpoint-dir");
  if (flag != "auto") return flag;
  if (!std::filesystem::exists(last())) return std::nullopt;
  return last();
}

int Checkpointer::preempted(const TrainingPosition& pos, const RunningSums& running) {
  save(pos, running);
  if (dir_.empty())
    std::printf(
        "\nStopped by a signal at step %lld; nothing was saved (no --checkpoint-dir): the training so far is lost. "
        "Pass --checkpoint-dir DIR to keep a run's progress, and --resume auto to continue it. Exiting with status "
        "%d (preempted).\n",
        (long long)pos.step, kPreemptedExit);
  else
    std::printf(
        "\nStopped by a signal at step %lld after writing a checkpoint to %s; exiting with status %d "
        "(preempted).\n",
        (long long)pos.step, last().c_str(), kPreemptedExit);
  std::fflush(stdout);
  return kPreemptedExit;
}

void Checkpointer::save(const TrainingPosition& pos, const RunningSums& running) {
  if (dir_.empty()) return;
  TrainingPosition p = pos;
  data::LoaderPosition lp = loader_.position();
  // A run stopped right after an epoch's last batch resumes at the start of the next epoch.
  if (lp.batch >= loader_.batches_per_epoch()) lp = {lp.epoch + 1, 0};
  p.loader_epoch = lp.epoch;
  p.loader_batch = lp.batch;
  std::map<std::string, std::string> meta = meta_;
  if (lp.batch > 0) put_running(running, meta);
  if (job_ && job_->active()) return job_->save(dir_, state_, p, meta);
  save_training(last(), state_, p, meta);
}

std::tuple<TrainingPosition, std::map<std::string, std::string>, bool> Checkpointer::load(const std::string& flag,
                                                                                          const std::string& path) {
  namespace fs = std::filesystem;
  if (job_ && job_->active()) {
    // A data-parallel checkpoint is a folder: last.ckpt and one file per rank beside it.
    EMBER_CHECK(flag == "auto" || fs::path(flag).filename() == "last.ckpt", "--resume ", flag,
                ": a data-parallel run resumes from a checkpoint folder's last.ckpt (or auto)");
    return job_->load(flag == "auto" ? dir_ : fs::path(flag).parent_path().string(), state_);
  }
  auto [pos, meta] = load_training(path, state_);
  EMBER_CHECK(!job_ || pos.world_size <= 1 || job_->reshard(), "--resume ", path,
              ": written by a data-parallel job of ", pos.world_size,
              " ranks; resume it with --data-parallel on as many ranks, or pass --reshard to continue in one process");
  return {pos, meta, false};
}

}  // namespace ember::train
