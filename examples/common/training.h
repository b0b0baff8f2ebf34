// What every training example shares beyond flags and progress: the standard flags (data, epochs,
// batch size, learning rate, seed, device, checkpoints, resume, max steps, ...), finding MNIST or
// falling back to Debian's Fashion-MNIST, stopping cleanly on SIGINT/SIGTERM, checkpoint/resume
// bookkeeping around a DataLoader, and a classifier's train-and-evaluate loop (custom_model uses
// it so that its file is only the model and a few lines).
#pragma once

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/flags.h"
#include "common/progress.h"
#include "core/cpu_capability.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "data/vocabulary.h"
#include "layers/checkpoint.h"
#include "layers/nn.h"

namespace ember::examples {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kPreemptedExit = 75;  // EX_TEMPFAIL: the scheduler resumes the job later
// Bounds of --workers and --threads (Flags::integer_in): a typo must not start 100,000 threads.
inline constexpr long long kMaxWorkers = 256, kMaxThreads = 1024;

// The device as the start-up line names it: on the CPU with the kernels' capability level and the
// math threads ("cpu (avx2 kernels, 2 threads)"), so a log says what the numbers were measured
// on. An unusable EMBER_CPU_CAPABILITY throws here, with its reason, before training starts.
inline std::string device_label(const Device& dev) {
  if (dev.type != DeviceType::CPU) return dev.str();
  return dev.str() + " (" + cpu_capability_name(cpu_capability()) + " kernels, " + std::to_string(get_num_threads()) +
         " threads)";
}

// The flags every example takes; defaults differ per example.
struct CommonFlags {
  std::string data, device, checkpoint_dir, resume, log;
  long long epochs, batch_size, seed, max_steps, limit, workers, threads;
  double lr;

  CommonFlags(Flags& f, long long epochs_def, long long batch_def, double lr_def, const std::string& name) {
    data = f.str("data", "data/mnist", "directory holding the four MNIST IDX files (else Fashion-MNIST is used)");
    epochs = f.integer("epochs", epochs_def, "passes over the training set");
    batch_size = f.integer("batch-size", batch_def, "examples per step");
    lr = f.real("lr", lr_def, "learning rate");
    seed = f.integer("seed", 0, "seed for weights, shuffling, noise and everything random");
    device = f.str("device", "auto", "cpu, cuda, cuda:N or auto");
    checkpoint_dir = f.str("checkpoint-dir", "runs/" + name, "checkpoints (and sample grids) go here; empty: none");
    resume = f.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
    max_steps = f.integer("max-steps", -1, "stop after this many optimizer steps in total (-1: no limit)");
    limit = f.integer("limit", -1, "use only the first N training and test examples (-1: all)");
    workers = f.integer_in("workers", 1, 0, kMaxWorkers, "data-loader worker threads");
    threads = f.integer_in("threads", 0, 0, kMaxThreads, "CPU threads for the math (0: all cores)");
    log = f.str("log", "", "metrics file (CSV); empty: checkpoint-dir/metrics.csv, or none without checkpoint-dir");
  }
  // Validates the values (exit 2 on nonsense) and applies --threads.
  void check(Flags& f) {
    if (epochs < 1 || batch_size < 1 || !(lr > 0) || (limit < 1 && limit != -1))
      f.fail("--epochs, --batch-size, --lr and --limit must be positive");
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    if (log.empty() && !checkpoint_dir.empty()) log = (std::filesystem::path(checkpoint_dir) / "metrics.csv").string();
    std::error_code ec;
    if (!checkpoint_dir.empty() && !std::filesystem::is_directory(checkpoint_dir) &&
        !std::filesystem::create_directories(checkpoint_dir, ec))
      f.fail("cannot create --checkpoint-dir '" + checkpoint_dir + "': " + (ec ? ec.message() : "not a directory"));
  }
  Device dev() const { return device == "auto" ? Device::best() : Device(device); }
};

// The MNIST files in `dir`, or Fashion-MNIST from Debian's package with a message saying so.
// Returns (root, name), or nullopt after printing what to do when neither is there.
inline std::optional<std::pair<std::string, std::string>> find_mnist_data(const std::string& dir,
                                                                          const std::string& program) {
  if (data::MNIST::available(dir)) return std::make_pair(dir, std::string("MNIST"));
  if (data::MNIST::available(kFashionMnistDir)) {
    std::printf(
        "No MNIST files in '%s' (run scripts/download-mnist.sh where there is internet).\n"
        "Training on Fashion-MNIST from %s instead.\n",
        dir.c_str(), kFashionMnistDir);
    return std::make_pair(std::string(kFashionMnistDir), std::string("Fashion-MNIST"));
  }
  std::fprintf(stderr,
               "%s: no MNIST files in '%s' and no Fashion-MNIST in %s.\n"
               "Run scripts/download-mnist.sh (needs internet) or scripts/setup.sh (installs Debian's\n"
               "dataset-fashion-mnist), or pass --data DIR with the four IDX files.\n",
               program.c_str(), dir.c_str(), kFashionMnistDir);
  return std::nullopt;
}

// Set by SIGINT/SIGTERM; the loops checkpoint and exit with kPreemptedExit when they see it.
inline std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}
inline void install_stop_handlers() {
  std::signal(SIGTERM, [](int) { stop_requested() = true; });
  std::signal(SIGINT, [](int) { stop_requested() = true; });
}

// A run whose position already reaches --max-steps (a job resumed after it finished, or
// --max-steps 0) trains nothing: it says so and the caller ends, leaving the checkpoint and the
// log as they are. Checked only after a step, the limit would let such a run take one more.
inline bool reached_max_steps(int64_t step, int64_t max_steps) {
  if (max_steps < 0 || step < max_steps) return false;
  std::printf("At step %lld, --max-steps %lld is reached: nothing to train.\n", (long long)step, (long long)max_steps);
  return true;
}

// Saves and restores a TrainingState plus the loader's position as checkpoint-dir/last.ckpt.
class Checkpointer {
 public:
  Checkpointer(std::string dir, TrainingState state, data::DataLoader& loader, std::map<std::string, std::string> meta)
      : dir_(std::move(dir)), state_(std::move(state)), loader_(loader), meta_(std::move(meta)) {}

  std::string last() const { return (std::filesystem::path(dir_) / "last.ckpt").string(); }

  // --resume: "" starts fresh, "auto" resumes from checkpoint-dir/last.ckpt when it exists, any
  // other value is a checkpoint path that must exist. Returns the position to continue from.
  TrainingPosition resume(const std::string& flag) {
    TrainingPosition pos;
    const std::optional<std::string> found = resume_path(flag);
    if (!found) {
      if (flag == "auto") std::printf("No checkpoint at %s yet: starting from scratch.\n", last().c_str());
      return pos;
    }
    const std::string& path = *found;
    pos = load_training(path, state_).first;
    loader_.set_position({pos.loader_epoch, pos.loader_batch});
    pos.epoch = pos.loader_epoch;
    std::printf("Resumed from %s at epoch %lld, step %lld.\n", path.c_str(), (long long)pos.epoch, (long long)pos.step);
    return pos;
  }

  // The checkpoint that resume(flag) loads, or nullopt when it starts fresh (so that a caller can
  // check what lies beside the checkpoint, such as a vocabulary, before loading it).
  std::optional<std::string> resume_path(const std::string& flag) const {
    if (flag.empty()) return std::nullopt;
    EMBER_CHECK(flag != "auto" || !dir_.empty(), "--resume auto needs --checkpoint-dir");
    if (flag != "auto") return flag;
    if (!std::filesystem::exists(last())) return std::nullopt;
    return last();
  }

  // After SIGINT/SIGTERM: writes the checkpoint, says so, and returns kPreemptedExit for main to
  // return (the scheduler resumes the job later with --resume auto).
  int preempted(const TrainingPosition& pos) {
    save(pos);
    std::printf("\nStopped by a signal at step %lld%s; exiting with status %d (preempted).\n", (long long)pos.step,
                dir_.empty() ? "" : " after writing a checkpoint", kPreemptedExit);
    return kPreemptedExit;
  }

  // Writes last.ckpt (atomically) with the loader's current position; nothing without a dir.
  void save(const TrainingPosition& pos) {
    if (dir_.empty()) return;
    TrainingPosition p = pos;
    data::LoaderPosition lp = loader_.position();
    // A run stopped right after an epoch's last batch resumes at the start of the next epoch.
    if (lp.batch >= loader_.batches_per_epoch()) lp = {lp.epoch + 1, 0};
    p.loader_epoch = lp.epoch;
    p.loader_batch = lp.batch;
    save_training(last(), state_, p, meta_);
  }

 private:
  std::string dir_;
  TrainingState state_;
  data::DataLoader& loader_;
  std::map<std::string, std::string> meta_;
};

// For the text examples: the vocabulary saved as vocab.txt beside the checkpoint at `ckpt_path`
// must give every token the id that the one built now gives it, or the embedding rows would mean
// other tokens. Prints what to pass the same (`flags`) and returns false when they differ.
inline bool vocabulary_matches_checkpoint(const data::Vocabulary& vocab, const std::string& ckpt_path,
                                          const std::string& program, const std::string& flags) {
  const std::filesystem::path saved = std::filesystem::path(ckpt_path).parent_path() / "vocab.txt";
  if (!std::filesystem::exists(saved) || vocab.same_ids_as(data::Vocabulary::load(saved.string()))) return true;
  std::fprintf(stderr, "%s: the vocabulary built now differs from the checkpoint's %s: resume with the same %s.\n",
               program.c_str(), saved.c_str(), flags.c_str());
  return false;
}

// Accuracy and mean cross-entropy of a classifier over a data set.
inline std::pair<double, double> evaluate_classifier(nn::Module& net, const data::Dataset& ds, Device dev,
                                                     int64_t batch = 256) {
  NoGradGuard ng;
  net.eval();
  data::DataLoader loader(ds, {.batch_size = batch, .shuffle = false});
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  for (auto& [x, y] : loader) {
    Tensor logits = net(x.to(dev)), yd = y.to(dev);
    loss_sum += cross_entropy(logits, yd, {.reduction = Reduction::Sum}).item();
    correct += sum(eq(argmax(logits, 1), yd)).item<int64_t>();
    total += y.numel();
  }
  net.train();
  return {total ? double(correct) / double(total) : 0.0, total ? loss_sum / double(total) : 0.0};
}

// Trains a classifier on MNIST (or Fashion-MNIST) with Adam and the common flags: progress bar,
// metrics log, evaluation after every epoch, checkpoints, resume, --max-steps, and exit status
// kPreemptedExit after a checkpoint on SIGINT/SIGTERM. Returns the process exit status.
inline int train_mnist_classifier(nn::Module& net, const std::string& model_name, CommonFlags& cf) {
  auto found = find_mnist_data(cf.data, model_name);
  if (!found) return 1;
  auto [root, data_name] = *found;
  data::MnistOptions mopts{.normalize = std::make_pair(0.1307, 0.3081), .transform = nullptr, .limit = cf.limit};
  data::MNIST train_set(root, data::Split::Train, mopts), test_set(root, data::Split::Test, mopts);
  const Device dev = cf.dev();
  net.to(dev);
  optim::Adam opt(net.parameters(), {.lr = cf.lr});
  data::DataLoader loader(train_set, {.batch_size = cf.batch_size,
                                      .workers = static_cast<int>(cf.workers),
                                      .seed = static_cast<uint64_t>(cf.seed),
                                      .pin_memory = dev.is_cuda()});
  Checkpointer ckpt(cf.checkpoint_dir, {&net, {&opt}, {{"default", &default_generator()}}}, loader,
                    {{"model", model_name}, {"data", data_name}});
  TrainingPosition pos = ckpt.resume(cf.resume);
  install_stop_handlers();
  std::printf("Training %s (%lld parameters) on %s (%lld examples) on %s: %lld epochs, batch %lld, Adam lr %g\n",
              model_name.c_str(), (long long)net.num_parameters(), data_name.c_str(), (long long)train_set.size(),
              device_label(dev).c_str(), cf.epochs, cf.batch_size, cf.lr);
  if (reached_max_steps(pos.step, cf.max_steps)) return 0;
  MetricsLog log(cf.log, {"epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc", "seconds"});
  for (; pos.epoch < cf.epochs; ++pos.epoch) {
    ProgressBar bar("epoch " + std::to_string(pos.epoch + 1) + "/" + std::to_string(cf.epochs),
                    loader.batches_per_epoch());
    double loss_sum = 0;
    int64_t correct = 0, seen = 0;
    bool stop_now = false;
    for (auto& [x, y] : loader) {
      Tensor yd = y.to(dev), logits = net(x.to(dev));
      Tensor loss = cross_entropy(logits, yd);
      opt.zero_grad();
      loss.backward();
      opt.step();
      ++pos.step;
      loss_sum += loss.item() * double(y.numel());
      correct += sum(eq(argmax(logits.detach(), 1), yd)).item<int64_t>();
      seen += y.numel();
      bar.update(loader.position().batch, seen,
                 {{"loss", loss_sum / double(seen)}, {"acc", double(correct) / double(seen)}});
      if (stop_requested()) return ckpt.preempted(pos);
      if (cf.max_steps >= 0 && pos.step >= cf.max_steps) {
        stop_now = true;
        break;
      }
    }
    auto [acc, tloss] = evaluate_classifier(net, test_set, dev);
    const double tl = seen ? loss_sum / double(seen) : 0.0, ta = seen ? double(correct) / double(seen) : 0.0;
    std::printf("epoch %lld: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s\n", (long long)pos.epoch + 1,
                tl, ta, tloss, acc, bar.elapsed());
    log.row({{"epoch", double(pos.epoch + 1)},
             {"step", double(pos.step)},
             {"train_loss", tl},
             {"train_acc", ta},
             {"test_loss", tloss},
             {"test_acc", acc},
             {"seconds", bar.elapsed()}});
    ckpt.save(pos);  // the loader's position says where to pick up: mid-epoch or the next epoch
    if (stop_now) break;
  }
  return 0;
}

}  // namespace ember::examples
