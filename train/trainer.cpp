#include "train/trainer.h"

#include <cstdio>

#include "train/precision.h"

namespace ember::train {

TrainerOptions trainer_options(const CommonFlags& cf, std::vector<std::string> columns) {
  return {.epochs = cf.epochs,
          .max_steps = cf.max_steps,
          .checkpoint_every = cf.checkpoint_every,
          .checkpoint_dir = cf.checkpoint_dir,
          .resume = cf.resume,
          .log = cf.log,
          .overwrite = cf.overwrite,
          .columns = std::move(columns),
          .tensorboard = cf.tensorboard,
          .init = cf.init,
          .global_batch = cf.batch_size};
}

namespace {
// Every checkpoint records the run's precision and, in fp16, holds its loss scaler's state.
TrainingState with_precision(TrainingState s) {
  s.precision = run_precision().name();
  s.grad_scaler = run_precision().scaler();
  return s;
}
}  // namespace

Trainer::Trainer(TrainerOptions opts, TrainingState state, data::DataLoader& loader,
                 std::map<std::string, std::string> meta, ParallelJob* job)
    : opts_(std::move(opts)),
      loader_(loader),
      job_(job),
      ckpt_(opts_.checkpoint_dir, with_precision(std::move(state)), loader,
            with_init_record(std::move(meta), opts_.init), job) {}

const TrainingPosition& Trainer::resume() {
  pos_ = ckpt_.resume(opts_.resume);
  if (!ckpt_.resumed() && !opts_.init.path.empty()) {
    const std::string said = init_from_checkpoint(*ckpt_.state().model, opts_.init);
    if (!job_ || job_->chatty()) std::printf("%s\n", said.c_str());
  }
  install_stop_handlers();
  return pos_;
}

std::optional<std::string> Trainer::weights_path() const {
  if (auto p = resume_path()) return p;
  if (!opts_.init.path.empty()) return opts_.init.path;
  return std::nullopt;
}

int Trainer::fit(const TrainingLoop& loop, const std::function<void()>& done) {
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

bool Trainer::finished() const {
  if (!ckpt_.resumed() || pos_.epoch < opts_.epochs) return false;
  std::printf(
      "The run of %s has finished its --epochs %lld (at step %lld): nothing to train, and its checkpoint and "
      "model are left as they are. Pass a larger --epochs to train further.\n",
      ckpt_.resumed_from().c_str(), (long long)opts_.epochs, (long long)pos_.step);
  std::fflush(stdout);
  return true;
}

JobElasticReport Trainer::elastic_report(int64_t steps, double elapsed, double sync_before) const {
  JobElasticReport e{.batch = opts_.global_batch,
                     .steps_per_s = elapsed > 0 ? static_cast<double>(steps) / elapsed : 0.0,
                     .noise_scale = job_ ? job_->noise_scale() : std::nullopt};
  // On one rank nothing is synchronised: no figure rather than a measured zero.
  if (job_ && job_->active() && job_->size() > 1 && steps > 0)
    e.sync_s = (job_->exposed_sync_seconds() - sync_before) / static_cast<double>(steps);
  return e;
}

int Trainer::run_epoch(const TrainingLoop& loop, bool& stop_now) {
  ProgressBar& bar = bar_.emplace("epoch " + std::to_string(pos_.epoch + 1) + "/" + std::to_string(opts_.epochs),
                                  loader_.batches_per_epoch(), opts_.epochs - pos_.epoch - 1);
  RunningSums sums = ckpt_.take_running();  // a resumed epoch goes on from its checkpoint's sums
  int64_t samples = 0, steps = 0;
  const double sync_before = job_ ? job_->exposed_sync_seconds() : 0.0;  // the epoch's own, as steps_per_s
  for (auto& [x, y] : loader_) {
    ++steps;
    ++pos_.step;  // position().step is the step being taken while loop.step runs
    StepReport r = loop.step(x, y, sums);
    const bool stop = job_ ? job_->end_step(loader_, stop_requested()) : stop_requested().load();
    if (stop) stop_requested() = true;
    samples += r.samples;
    bar.update(loader_.position().batch, samples, r.metrics);
    job_line_.report(pos_.epoch + 1, opts_.epochs, pos_.step, r.metrics,
                     bar.elapsed() > 0 ? static_cast<double>(samples) / bar.elapsed() : 0.0,
                     loader_.position().batch >= loader_.batches_per_epoch(),
                     elastic_report(steps, bar.elapsed(), sync_before));
    if (tb_) log_step(r, samples, bar);
    if (stop) {
      // Stopped at an epoch's last batch: the epoch is whole, and its summary and metrics row
      // come now (the resumed run starts at the next epoch and would never write them).
      if (loader_.position().batch >= loader_.batches_per_epoch())
        loop.end_epoch({pos_.epoch, pos_.step, epoch_title(pos_.epoch, false, 0, 0), sums, bar});
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

void Trainer::log_step(const StepReport& r, int64_t samples, const ProgressBar& bar) {
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

}  // namespace ember::train
