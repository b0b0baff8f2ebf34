// The training loop every training program shares, as Keras' fit or a PyTorch Lightning Trainer: a
// program says what one step does with a batch and what the end of an epoch reports, and the
// Trainer runs the epochs around them: resuming from a checkpoint, a progress bar with the
// epoch's and the run's ETA, the metrics log, --max-steps, a checkpoint after every epoch (every
// --checkpoint-every steps too, when given, and
// on SIGINT/SIGTERM, then exit status 75, which is how the scheduler stops and later resumes a
// job), TensorBoard logs (--tensorboard: every step's metrics, throughput and learning rate, the
// metrics log's rows, and weight and gradient histograms every --tensorboard-every steps), and in a
// data-parallel job the per-step agreements between the ranks (parallel_job.h).
//
//   train::Trainer trainer(options, {&net, {&opt}, {{"default", &default_generator()}}}, loader, meta);
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

#include "data/dataloader.h"
#include "interop/summary_writer.h"
#include "layers/checkpoint.h"
#include "train/checkpointer.h"
#include "train/parallel_job.h"
#include "train/progress.h"
#include "train/training.h"

namespace ember::train {

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
  int64_t global_batch = 0;             // for the daemon's progress line (elastic jobs)
};

// The options from the common flags (--epochs, --max-steps, --checkpoint-dir, --resume, --log).
TrainerOptions trainer_options(const CommonFlags& cf, std::vector<std::string> columns);

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

// A program's side of the loop.
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
          ParallelJob* job = nullptr);

  // Loads --resume (saying from where, or that there is no checkpoint yet), then installs the
  // SIGINT/SIGTERM handlers, before the program's start-up lines: a signal from then on ends in
  // a checkpoint.
  const TrainingPosition& resume();
  // The checkpoint resume() will load, if any (to check what lies beside it first).
  std::optional<std::string> resume_path() const { return ckpt_.resume_path(opts_.resume); }
  // The checkpoint whose weights resume() will load, if any: --resume's, else --init-from's (the
  // text programs check the vocabulary beside it).
  std::optional<std::string> weights_path() const;
  const TrainingPosition& position() const { return pos_; }
  // The metrics log, and the seconds since the epoch (or its resumed part) began: for rows
  // written during fit() (a GAN writes one every few steps).
  MetricsLog& log() { return *log_; }
  double epoch_seconds() const { return bar_ ? bar_->elapsed() : 0.0; }
  // The TensorBoard writer during fit(), on the rank that reports; null without --tensorboard.
  SummaryWriter* tensorboard() { return tb_ ? &*tb_ : nullptr; }

  // Runs the epochs; returns main's exit status (0, or kPreemptedExit after a signal). `done`,
  // when given, runs once training has ended normally (the programs write their model there); a
  // run whose position already reaches --max-steps, or a resumed run whose epochs are all done,
  // trains nothing, runs no `done` and leaves the checkpoint, the model and the log as they are.
  int fit(const TrainingLoop& loop, const std::function<void()>& done = nullptr);

 private:
  // A resumed run that has done all its --epochs says so (it once wrote the model again and exited
  // 0 without a word, as if it had trained).
  bool finished() const;
  // One epoch: its steps, its end and its checkpoint. Returns kPreemptedExit after a signal, else
  // 0, with `stop_now` set when --max-steps is reached.
  int run_epoch(const TrainingLoop& loop, bool& stop_now);
  // An elastic job's report after `steps` steps of this epoch in `elapsed` s (the exposed
  // synchronisation since the epoch began: job_'s figure less `sync_before`).
  JobElasticReport elastic_report(int64_t steps, double elapsed, double sync_before) const;
  // One step's TensorBoard scalars (tagged step/...), and every --tensorboard-every steps each
  // parameter's and gradient's histogram. The writer copies and queues; its thread does the rest.
  void log_step(const StepReport& r, int64_t samples, const ProgressBar& bar);

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

}  // namespace ember::train
