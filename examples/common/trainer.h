// The training loop every example shares, as Keras' fit or a PyTorch Lightning Trainer: an
// example says what one step does with a batch and what the end of an epoch reports, and the
// Trainer runs the epochs around them: resuming from a checkpoint, a progress bar with the
// epoch's and the run's ETA, the metrics log, --max-steps, a checkpoint after every epoch (every
// --checkpoint-every steps too, when given, and
// on SIGINT/SIGTERM, then exit status 75, which is how the scheduler stops and later resumes a
// job), TensorBoard logs (--tensorboard: every step's metrics, throughput and learning rate, the
// metrics log's rows, and weight and gradient histograms every --tensorboard-every steps), and in a
// data-parallel job the per-step agreements between the ranks (parallel_job.h).
//
//   examples::Trainer trainer(options, {&net, {&opt}, {{"default", &default_generator()}}}, loader, meta);
//   trainer.resume();
//   return trainer.fit({.step = ..., .end_epoch = ...});
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/checkpointer.h"
#include "common/parallel_job.h"
#include "common/progress.h"
#include "common/training.h"
#include "data/dataloader.h"
#include "interop/summary_writer.h"
#include "layers/checkpoint.h"

namespace ember::examples {

struct TrainerOptions {
  int64_t epochs = 1;
  int64_t max_steps = -1;        // -1: no limit
  int64_t checkpoint_every = 0;  // also checkpoint every N steps within an epoch; 0: at epoch ends only
  std::string checkpoint_dir, resume, log;
  bool overwrite = false;            // --overwrite: a fresh run restarts a --log that holds rows
  std::vector<std::string> columns;  // of the metrics log
  // The log has a row per epoch (a resume drops the row of the epoch in progress: it is written
  // again for the whole epoch), rather than a row every few steps (the GANs).
  bool rows_per_epoch = true;
  bool say_checkpoint_written = false;  // "Checkpoint written to ..." after every epoch's checkpoint
  TensorBoardFlags tensorboard;         // dir empty: no TensorBoard logs
  InitFrom init;                        // --init-from: a fresh run starts from these weights
};

// The options from the common flags (--epochs, --max-steps, --checkpoint-dir, --resume, --log).
inline TrainerOptions trainer_options(const CommonFlags& cf, std::vector<std::string> columns) {
  return {.epochs = cf.epochs,
          .max_steps = cf.max_steps,
          .checkpoint_every = cf.checkpoint_every,
          .checkpoint_dir = cf.checkpoint_dir,
          .resume = cf.resume,
          .log = cf.log,
          .overwrite = cf.overwrite,
          .columns = std::move(columns),
          .tensorboard = cf.tensorboard,
          .init = cf.init};
}

// What one step reports for the progress bar.
struct StepReport {
  int64_t samples = 0;                                  // examples it trained on (for samples/s)
  std::vector<std::pair<std::string, double>> metrics;  // shown in this order
};

// What the end of an epoch gets: `title` is "epoch 3" or, when --max-steps cut it short,
// "epoch 3 (partial: 5 of 16 batches, --max-steps)".
struct EpochEnd {
  int64_t epoch;  // from 0
  int64_t step;   // optimizer steps so far
  std::string title;
  const RunningSums& sums;  // the epoch's, resumed ones included
  const ProgressBar& bar;
  // Since the epoch (or its resumed part) began, read when the summary is printed: evaluation included.
  double seconds() const { return bar.elapsed(); }
};

// An example's side of the loop.
struct TrainingLoop {
  // Trains on one batch and adds to the epoch's running sums (which travel in mid-epoch checkpoints).
  std::function<StepReport(const Tensor& x, const Tensor& y, RunningSums& sums)> step;
  // Evaluates, prints the epoch's summary and writes its log row (Trainer::log()).
  std::function<void(const EpochEnd&)> end_epoch;
  // Before every checkpoint (a GAN writes the log rows of its steps since the last row).
  std::function<void()> before_checkpoint;
};

class Trainer {
 public:
  // `meta` goes into every checkpoint (its "flag.*" and "setting.*" entries must match on resume); `job`: the
  // program takes --data-parallel (ParallelJob, whether or not this run is data-parallel).
  Trainer(TrainerOptions opts, TrainingState state, data::DataLoader& loader, std::map<std::string, std::string> meta,
          ParallelJob* job = nullptr)
      : opts_(std::move(opts)),
        loader_(loader),
        job_(job),
        ckpt_(opts_.checkpoint_dir, std::move(state), loader, with_init_record(std::move(meta), opts_.init), job) {}

  // Loads --resume (saying from where, or that there is no checkpoint yet), then installs the
  // SIGINT/SIGTERM handlers, before the example's start-up lines: a signal from then on ends in
  // a checkpoint.
  const TrainingPosition& resume() {
    pos_ = ckpt_.resume(opts_.resume);
    if (!ckpt_.resumed() && !opts_.init.path.empty()) {
      const std::string said = init_from_checkpoint(*ckpt_.state().model, opts_.init);
      if (!job_ || job_->chatty()) std::printf("%s\n", said.c_str());
    }
    install_stop_handlers();
    return pos_;
  }
  // The checkpoint resume() will load, if any (to check what lies beside it first).
  std::optional<std::string> resume_path() const { return ckpt_.resume_path(opts_.resume); }
  // The checkpoint whose weights resume() will load, if any: --resume's, else --init-from's (the
  // text programs check the vocabulary beside it).
  std::optional<std::string> weights_path() const {
    if (auto p = resume_path()) return p;
    if (!opts_.init.path.empty()) return opts_.init.path;
    return std::nullopt;
  }
  const TrainingPosition& position() const { return pos_; }
  // The metrics log, and the seconds since the epoch (or its resumed part) began: for rows
  // written during fit() (a GAN writes one every few steps).
  MetricsLog& log() { return *log_; }
  double epoch_seconds() const { return bar_ ? bar_->elapsed() : 0.0; }
  // The TensorBoard writer during fit(), on the rank that reports; null without --tensorboard.
  SummaryWriter* tensorboard() { return tb_ ? &*tb_ : nullptr; }

  // Runs the epochs; returns main's exit status (0, or kPreemptedExit after a signal). `done`,
  // when given, runs once training has ended normally (the examples write their model there); a
  // run whose position already reaches --max-steps, or a resumed run whose epochs are all done,
  // trains nothing, runs no `done` and leaves the checkpoint, the model and the log as they are.
  int fit(const TrainingLoop& loop, const std::function<void()>& done = nullptr) {
    if (reached_max_steps(pos_.step, opts_.max_steps) || finished()) return 0;
    log_.emplace(
        job_ && !job_->chatty() ? "" : opts_.log, opts_.columns,
        existing_log(ckpt_.resumed(), pos_, opts_.rows_per_epoch, opts_.log, opts_.checkpoint_dir, opts_.overwrite));
    if (!opts_.tensorboard.dir.empty() && (!job_ || job_->chatty())) {
      tb_.emplace(opts_.tensorboard.dir);
      log_->mirror_to(&*tb_);
      std::string run;  // the run's settings, as the checkpoint records them
      for (const auto& [k, v] : ckpt_.meta()) run += "- " + k + ": " + v + "\n";
      tb_->add_text("run", run, pos_.step);
    }
    for (; pos_.epoch < opts_.epochs; ++pos_.epoch) {
      bool stop_now = false;
      if (const int status = run_epoch(loop, stop_now); status != 0) return status;
      if (stop_now) break;
    }
    if (done) done();
    if (tb_) tb_->close();  // a write that failed is an error of the run, not lost at exit
    return 0;
  }

 private:
  // A resumed run that has done all its --epochs says so (it once wrote the model again and exited
  // 0 without a word, as if it had trained).
  bool finished() const {
    if (!ckpt_.resumed() || pos_.epoch < opts_.epochs) return false;
    std::printf(
        "The run of %s has finished its --epochs %lld (at step %lld): nothing to train, and its checkpoint and "
        "model are left as they are. Pass a larger --epochs to train further.\n",
        ckpt_.resumed_from().c_str(), (long long)opts_.epochs, (long long)pos_.step);
    std::fflush(stdout);
    return true;
  }

  // One epoch: its steps, its end and its checkpoint. Returns kPreemptedExit after a signal, else
  // 0, with `stop_now` set when --max-steps is reached.
  int run_epoch(const TrainingLoop& loop, bool& stop_now) {
    ProgressBar& bar = bar_.emplace("epoch " + std::to_string(pos_.epoch + 1) + "/" + std::to_string(opts_.epochs),
                                    loader_.batches_per_epoch(), opts_.epochs - pos_.epoch - 1);
    RunningSums sums = ckpt_.take_running();  // a resumed epoch goes on from its checkpoint's sums
    int64_t samples = 0;
    for (auto& [x, y] : loader_) {
      ++pos_.step;  // position().step is the step being taken while loop.step runs
      StepReport r = loop.step(x, y, sums);
      const bool stop = job_ ? job_->end_step(loader_, stop_requested()) : stop_requested().load();
      if (stop) stop_requested() = true;
      samples += r.samples;
      bar.update(loader_.position().batch, samples, r.metrics);
      job_line_.report(pos_.epoch + 1, opts_.epochs, pos_.step, r.metrics,
                       bar.elapsed() > 0 ? static_cast<double>(samples) / bar.elapsed() : 0.0,
                       loader_.position().batch >= loader_.batches_per_epoch());
      if (tb_) log_step(r, samples, bar);
      if (stop) {
        if (loop.before_checkpoint) loop.before_checkpoint();
        return ckpt_.preempted(pos_, sums);
      }
      if (opts_.max_steps >= 0 && pos_.step >= opts_.max_steps) {
        stop_now = true;
        break;
      }
      // Mid-epoch checkpoints (the epoch's own end writes one anyway): a run killed outright
      // loses at most this many steps.
      if (opts_.checkpoint_every > 0 && pos_.step % opts_.checkpoint_every == 0 &&
          loader_.position().batch < loader_.batches_per_epoch()) {
        if (loop.before_checkpoint) loop.before_checkpoint();
        ckpt_.save(pos_, sums);
      }
    }
    const int64_t done = loader_.position().batch, batches = loader_.batches_per_epoch();
    loop.end_epoch(
        {pos_.epoch, pos_.step, epoch_title(pos_.epoch, done > 0 && done < batches, done, batches), sums, bar});
    if (loop.before_checkpoint) loop.before_checkpoint();
    ckpt_.save(pos_, sums);  // the loader's position says where to pick up: mid-epoch or the next epoch
    if (opts_.say_checkpoint_written && !opts_.checkpoint_dir.empty()) {
      std::printf("Checkpoint written to %s\n", ckpt_.last().c_str());
      std::fflush(stdout);
    }
    return 0;
  }

  // One step's TensorBoard scalars (tagged step/...), and every --tensorboard-every steps each
  // parameter's and gradient's histogram. The writer copies and queues; its thread does the rest.
  void log_step(const StepReport& r, int64_t samples, const ProgressBar& bar) {
    const int64_t step = pos_.step;
    for (const auto& [name, v] : r.metrics) tb_->add_scalar("step/" + name, v, step);
    if (bar.elapsed() > 0) tb_->add_scalar("step/samples_per_s", static_cast<double>(samples) / bar.elapsed(), step);
    const TrainingState& state = ckpt_.state();
    for (size_t i = 0; i < state.optimizers.size(); ++i) {
      const auto& groups = state.optimizers[i]->param_groups();
      if (groups.empty() || !groups[0].options.count("lr")) continue;
      tb_->add_scalar(state.optimizers.size() == 1 ? "step/lr" : "step/lr_" + std::to_string(i),
                      groups[0].options.at("lr"), step);
    }
    if (state.model && step % opts_.tensorboard.every == 0)
      for (const auto& [name, p] : state.model->named_parameters()) {
        tb_->add_histogram("weights/" + name, p, step);
        if (p.grad().defined()) tb_->add_histogram("grads/" + name, p.grad(), step);
      }
  }

  TrainerOptions opts_;
  data::DataLoader& loader_;
  ParallelJob* job_;
  std::optional<SummaryWriter> tb_;  // with --tensorboard, on the rank that reports
  Checkpointer ckpt_;
  TrainingPosition pos_;
  std::optional<MetricsLog> log_;
  std::optional<ProgressBar> bar_;  // the running epoch's
  JobProgressLine job_line_;        // what the scheduler daemon shows of the run
};

}  // namespace ember::examples
