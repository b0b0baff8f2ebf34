#include "train/checkpointer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "layers/optim/optimizer.h"

namespace ember::train {
namespace {

double meta_number(const std::map<std::string, std::string>& m, const std::string& key, double fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
}

}  // namespace

void Checkpointer::resume_elastic(const std::map<std::string, std::string>& file, TrainingPosition& pos) {
  auto now = meta_.find("elastic.batch-size");
  if (now == meta_.end()) return;
  // The data order is a permutation per epoch, cut into consecutive batches: the examples done so
  // far this epoch carry over to another batch size, rounded down to a whole batch of the new one
  // (fewer than one batch of examples seen again, said below). Rounded down, never up: up could
  // reach the epoch's end, which the loader takes for the next epoch's start, and the epoch would
  // never get its evaluation and metrics row.
  const double was = meta_number(file, "elastic.batch-size", meta_number(file, "flag.batch-size", 0));
  const double batch = std::strtod(now->second.c_str(), nullptr);
  if (was > 0 && was != batch && pos.loader_batch > 0) {
    const double done = static_cast<double>(pos.loader_batch) * was;
    const auto at = static_cast<int64_t>(std::floor(done / batch));
    std::printf("Elastic: global batch %g -> %g: %g examples of epoch %lld done, continuing at batch %lld%s.\n", was,
                batch, done, (long long)pos.loader_epoch + 1, (long long)at,
                done == static_cast<double>(at) * batch ? "" : " (the last examples done seen again)");
    pos.loader_batch = at;
  }
  // The optimizer's state came back with the rate it was saved with; this run's is the daemon's.
  const double lr = meta_number(meta_, "elastic.lr", 0);
  if (lr <= 0 || state_.optimizers.empty()) return;
  for (optim::Optimizer* o : state_.optimizers)
    for (optim::ParamGroup& g : o->param_groups()) g.options["lr"] = lr;
  const optim::Hyperparams& now_lr = state_.optimizers[0]->param_groups().at(0).options;
  std::printf("Elastic: learning rate %g\n", now_lr.count("lr") ? now_lr.at("lr") : 0.0);
}

TrainingPosition Checkpointer::resume(const std::string& flag) {
  // A run killed while writing into its folder (kill -9, a power cut) leaves the temporary file
  // of that write (a checkpoint, the model, a sample grid). A one-process run is the folder's
  // only writer now, so they go; the ranks of a parallel job share the folder, and one rank's
  // cleaning could remove another's write in progress, so there they stay.
  if (!dir_.empty() && !(job_ && job_->active())) remove_stale_temporaries(dir_);
  const std::optional<std::string> found = resume_path(flag);
  if (flag == "auto") check_every_rank_sees(found.has_value());
  if (!found) {
    if (flag == "auto") std::printf("No checkpoint at %s yet: starting from scratch.\n", last().c_str());
    return {};
  }
  const std::string& path = *found;
  auto [pos, file_meta, resharded] = load(flag, path);
  check_resume_settings(path, file_meta, meta_);
  resume_elastic(file_meta, pos);
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

void Checkpointer::check_every_rank_sees(bool found) {
  if (!job_ || !job_->active()) return;
  const std::vector<double> n = job_->sum({found ? 1.0 : 0.0, 1.0});
  EMBER_CHECK(n[0] == 0 || n[0] == n[1], "--resume auto: ", n[0], " of ", n[1], " ranks find ", last(), " (this rank ",
              found ? "does" : "does not",
              "): the --checkpoint-dir of a job over several hosts must be one folder that every host sees "
              "(a shared file system), not a node-local one");
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
