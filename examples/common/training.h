// What every training example shares beyond flags and progress: the standard flags (data, epochs,
// batch size, learning rate, seed, device, checkpoints, resume, max steps, ...), finding MNIST or
// falling back to Debian's Fashion-MNIST, stopping cleanly on SIGINT/SIGTERM, and the bookkeeping
// of checkpoints and resumes (settings that must match, running sums, which log rows stay). The
// loop that uses them is trainer.h.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "common/flags.h"
#include "common/init_from.h"
#include "common/progress.h"
#include "core/blas_kernels.h"
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

// The device as the start-up line names it: on the CPU with the kernels' capability level, the
// math threads and OpenBLAS's kernels ("cpu (avx2 kernels, 2 threads; OpenBLAS Haswell)"), so a
// log says what the numbers were measured on. An unusable EMBER_CPU_CAPABILITY throws here, with
// its reason, before training starts.
inline std::string device_label(const Device& dev) {
  if (dev.type != DeviceType::CPU) return dev.str();
  const int threads = get_num_threads();
  return dev.str() + " (" + cpu_capability_name(cpu_capability()) + " kernels, " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads") + "; OpenBLAS " + blas_kernels_description() + ")";
}

// `v` in the fewest digits that read back as exactly `v` (0.0002, not 0.00020000000000000001):
// checkpoint metadata compare and print this.
inline std::string exact_number(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// The MNIST folder used when --data is not given.
inline constexpr const char* kDefaultMnistDir = "data/mnist";

// The MNIST files for --data `dir`; returns (root, name). Fashion-MNIST from Debian's package
// stands in only when --data was left out and the default folder (data/mnist) holds none of the
// four files, with a notice on stderr; a --data given, whatever folder it names, must hold the
// four files, else an ember::Error names what is missing (a typo once trained on Fashion-MNIST
// with status 0).
inline std::pair<std::string, std::string> find_mnist_data(const std::string& dir, bool given) {
  namespace fs = std::filesystem;
  static const char* const kFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                       "t10k-labels-idx1-ubyte"};
  std::error_code ec;
  const bool is_dir = fs::is_directory(dir, ec);
  std::string missing;
  int found = 0;
  for (const char* f : kFiles) {
    if (is_dir && !data::MNIST::find_file(dir, f).empty()) {
      ++found;
    } else {
      missing += std::string(missing.empty() ? "" : ", ") + f + "[.gz]";
    }
  }
  if (found == 4) return {dir, "MNIST"};
  if (!given && found == 0) {
    EMBER_CHECK(data::MNIST::available(kFashionMnistDir), "no MNIST files in '", dir, "' and no Fashion-MNIST in ",
                kFashionMnistDir,
                ": run scripts/download-mnist.sh (needs internet) or scripts/setup.sh (installs Debian's "
                "dataset-fashion-mnist), or pass --data DIR with the four IDX files");
    std::fprintf(stderr,
                 "No MNIST files in '%s' (run scripts/download-mnist.sh where there is internet).\n"
                 "Training on Fashion-MNIST from %s instead.\n",
                 dir.c_str(), kFashionMnistDir);
    return {kFashionMnistDir, "Fashion-MNIST"};
  }
  if (!fs::exists(dir, ec))
    EMBER_FAIL("--data '", dir, "' does not exist (expected a folder holding the four MNIST IDX files)");
  if (!is_dir) EMBER_FAIL("--data '", dir, "' is not a folder (expected a folder holding the four MNIST IDX files)");
  EMBER_FAIL("--data '", dir, "' lacks ", missing, " (of the four MNIST IDX files",
             found ? "" : "; leave out --data to train on Fashion-MNIST", ")");
}

// The output folder of --<flag> (a checkpoint dir): refuses, before any training, a path that is
// not a folder, cannot be created or cannot be written (an existing /proc/self was once found only
// at the first checkpoint, after a whole epoch), and a fresh run (no --resume) into a folder that
// already holds a checkpoint unless `overwrite`: that used to replace last.ckpt and append to the
// old metrics.csv without a word. Each is an ember::Error (exit status 1): the flags are well
// formed, the folder is what is wrong, and the flag list would only push the message off the
// screen. Call it once the data are found, so that bad data leave no empty folder behind.
inline void prepare_output_dir(const std::string& flag, const std::string& dir, bool fresh, bool overwrite) {
  namespace fs = std::filesystem;
  if (dir.empty()) return;
  std::error_code ec;
  // Checked again after creating: data-parallel ranks create the same folder at the same time.
  if (!fs::is_directory(dir, ec) && !fs::create_directories(dir, ec) && !fs::is_directory(dir, ec))
    EMBER_FAIL("cannot create --", flag, " '", dir, "': ", ec ? ec.message() : "not a directory");
  std::string probe = (fs::path(dir) / ".write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  EMBER_CHECK(fd >= 0, "cannot write to --", flag, " '", dir, "': ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
  EMBER_CHECK(!fresh || overwrite || !fs::exists(fs::path(dir) / "last.ckpt", ec), "--", flag, " '", dir,
              "' already holds a checkpoint (last.ckpt): pass --resume auto to continue it, or --overwrite to start "
              "afresh (replacing it and its metrics.csv)");
}

// The "flag.*" checkpoint metadata that a resume must match (check_resume_settings): the
// settings that the checkpoint's optimizer state and data order depend on.
inline std::map<std::string, std::string> resume_settings(double lr, long long seed, long long batch_size,
                                                          long long limit, const std::string& data_root) {
  return {{"flag.lr", exact_number(lr)},
          {"flag.seed", std::to_string(seed)},
          {"flag.batch-size", std::to_string(batch_size)},
          {"flag.limit", std::to_string(limit)},
          {"flag.data", std::filesystem::weakly_canonical(data_root).string()}};
}

// How an example words some of the common flags' help (mnist_cnn keeps its own wording and
// writes no checkpoint unless asked).
struct CommonFlagsWording {
  std::string lr = "learning rate";
  std::string seed = "seed for weights, shuffling, noise and everything random";
  std::optional<std::string> checkpoint_dir;  // the default; nullopt: runs/<name>
  std::string checkpoint_dir_help = "checkpoints, metrics.csv and sample grids go here; empty: none";
};

// --tensorboard DIR and --tensorboard-every N, which every training example takes (Trainer writes
// the logs).
struct TensorBoardFlags {
  std::string dir;
  long long every = 100;
  TensorBoardFlags() = default;
  explicit TensorBoardFlags(Flags& f) {
    dir = f.str("tensorboard", "",
                "write TensorBoard event files here (losses, accuracy, learning rate, throughput, samples); "
                "empty: none");
    every = f.integer_in("tensorboard-every", 100, 1, 1000000000,
                         "steps between the weight and gradient histograms in --tensorboard");
  }
};

// --checkpoint-every, which every training program takes.
inline long long checkpoint_every_flag(Flags& f) {
  return f.integer_in("checkpoint-every", 0, 0, 1000000000000LL,
                      "also write the checkpoint every N optimizer steps within an epoch (0: only at the end of "
                      "each epoch and on SIGTERM)");
}

// The flags every example takes; defaults differ per example.
struct CommonFlags {
  std::string data, device, checkpoint_dir, resume, log;
  long long epochs, batch_size, seed, max_steps, checkpoint_every, limit, workers, threads;
  double lr;
  bool data_given, overwrite;
  std::string data_root, data_name;  // set by prepare()
  TensorBoardFlags tensorboard;
  InitFrom init;  // --init-from, --init-skip

  CommonFlags(Flags& f, long long epochs_def, long long batch_def, double lr_def, const std::string& name,
              const CommonFlagsWording& w = {}) {
    data = f.str("data", kDefaultMnistDir,
                 "directory holding the four MNIST IDX files (left out: Fashion-MNIST when data/mnist has none)");
    data_given = f.given("data");
    epochs = f.integer_min("epochs", epochs_def, 1, "passes over the training set");
    batch_size = f.integer_min("batch-size", batch_def, 1, "examples per step");
    lr = f.positive("lr", lr_def, w.lr);
    seed = f.integer("seed", 0, w.seed);
    device = f.device("device", "auto", "auto, cpu, cuda or cuda:N");
    checkpoint_dir = f.str("checkpoint-dir", w.checkpoint_dir.value_or("runs/" + name), w.checkpoint_dir_help);
    resume = f.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
    overwrite = f.boolean("overwrite", false,
                          "start afresh in a checkpoint-dir that holds a checkpoint, and in a --log that holds rows");
    max_steps = f.count_or_none("max-steps", 0, "no limit", "stop after this many optimizer steps in total");
    checkpoint_every = checkpoint_every_flag(f);
    limit = f.count_or_none("limit", 1, "all", "use only the first N training and test examples");
    workers = f.integer_in("workers", 1, 0, kMaxWorkers, "data-loader worker threads");
    threads = f.integer_in("threads", 0, 0, kMaxThreads, "CPU threads for the math (0: all cores)");
    log = f.str("log", "",
                "metrics file (CSV; a resumed run appends to it, a fresh one needs --overwrite if it holds rows); "
                "empty: checkpoint-dir/metrics.csv, or none without checkpoint-dir");
    tensorboard = TensorBoardFlags(f);
    init = InitFrom(f);
  }
  // Checks what the flags alone can tell (exit 2) and applies --threads.
  void check(Flags& f) {
    if (resume == "auto" && checkpoint_dir.empty()) f.fail("--resume auto needs --checkpoint-dir");
    init.check(f, resume);
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    if (log.empty() && !checkpoint_dir.empty()) log = (std::filesystem::path(checkpoint_dir) / "metrics.csv").string();
  }
  // Finds the data (an ember::Error when --data lacks them), then prepares --checkpoint-dir
  // (prepare_output_dir), in that order.
  void prepare() {
    std::tie(data_root, data_name) = find_mnist_data(data, data_given);
    prepare_output_dir("checkpoint-dir", checkpoint_dir, resume.empty(), overwrite);
  }
  // The settings a resume must share with its checkpoint (Checkpointer compares them).
  std::map<std::string, std::string> settings() const {
    return resume_settings(lr, seed, batch_size, limit, data_root);
  }
  Device dev() const { return device == "auto" ? Device::best() : Device(device); }
};

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

// Settings a checkpoint was written with that differ from this run's: the flags ("flag.<name>"
// metadata) and what a model file sets ("setting.<field>": its optimizers, schedules and layers,
// tools/train.cpp). A resume keeps the checkpoint's optimizer state and data order, so a new --lr,
// --seed or weight_decay would be silently ignored, a new --data or --batch-size would continue at
// the wrong example, and a layer without weights (a dropout) added or changed would go unnoticed.
// An ember::Error that lists every difference; a key missing on either side (an older
// checkpoint) is not compared.
inline void check_resume_settings(const std::string& path, const std::map<std::string, std::string>& file,
                                  const std::map<std::string, std::string>& now) {
  std::string diff;
  for (const auto& [key, value] : now) {
    const bool flag = key.rfind("flag.", 0) == 0;
    if (!flag && key.rfind("setting.", 0) != 0) continue;
    auto it = file.find(key);
    if (it == file.end() || it->second == value) continue;
    diff += std::string(diff.empty() ? "" : ", ") + (flag ? "--" + key.substr(5) : key.substr(8)) + " " + it->second +
            " (now " + value + ")";
  }
  EMBER_CHECK(diff.empty(), "--resume ", path, ": the checkpoint was written with ", diff,
              "; resume with the same values, or start a fresh run");
}

// An epoch's running sums (what its summary and metrics row average over) as checkpoint metadata
// ("running.<name>"), so that an epoch resumed mid-way reports the whole epoch, not only the
// steps after the resume.
using RunningSums = std::map<std::string, double>;
inline void put_running(const RunningSums& sums, std::map<std::string, std::string>& meta) {
  for (const auto& [k, v] : sums) meta["running." + k] = exact_number(v);
}
inline RunningSums get_running(const std::map<std::string, std::string>& meta) {
  RunningSums sums;
  for (const auto& [k, v] : meta)
    if (k.rfind("running.", 0) == 0) sums[k.substr(8)] = std::strtod(v.c_str(), nullptr);
  return sums;
}

// "Resumed from PATH at step S (epoch E, B of N batches done)." Epochs count from 1, as the
// progress bar and the summaries do.
inline void print_resumed(const std::string& path, const TrainingPosition& pos, int64_t batches_per_epoch,
                          const std::string& extra = "") {
  if (pos.loader_batch > 0)
    std::printf("Resumed from %s at step %lld (epoch %lld, %lld of %lld batches done)%s.\n", path.c_str(),
                (long long)pos.step, (long long)pos.loader_epoch + 1, (long long)pos.loader_batch,
                (long long)batches_per_epoch, extra.c_str());
  else
    std::printf("Resumed from %s at step %lld (start of epoch %lld)%s.\n", path.c_str(), (long long)pos.step,
                (long long)pos.loader_epoch + 1, extra.c_str());
}

// What a metrics log does with an existing file. A resumed run keeps the rows up to its
// checkpoint: a run killed after writing rows but before its next checkpoint writes them again
// (SIGKILL once left the GAN's steps 210 and 220 twice), and with `per_epoch` the row of the epoch
// in progress goes too (a --max-steps stop wrote it for part of the epoch; the resumed run
// writes it for the whole). A fresh run restarts the checkpoint folder's own metrics.csv (the
// folder held no checkpoint, or --overwrite was given), and a --log elsewhere only with
// `overwrite`: without it, a log that holds rows is another run's and is refused.
inline MetricsLog::Existing existing_log(bool resumed, const TrainingPosition& pos, bool per_epoch,
                                         const std::string& log, const std::string& checkpoint_dir, bool overwrite) {
  namespace fs = std::filesystem;
  if (resumed)
    return {MetricsLog::Existing::kKeep,
            [step = pos.step, done = pos.epoch, per_epoch](const std::map<std::string, double>& row) {
              auto s = row.find("step"), e = row.find("epoch");
              if (s == row.end() || s->second > double(step)) return false;
              return !per_epoch || (e != row.end() && e->second <= double(done));
            }};
  const bool own = !checkpoint_dir.empty() &&
                   fs::path(log).lexically_normal() == (fs::path(checkpoint_dir) / "metrics.csv").lexically_normal();
  return {own || overwrite ? MetricsLog::Existing::kRestart : MetricsLog::Existing::kRefuse, nullptr};
}

// An epoch summary ends with a flush: with stdout a file (`sched logs`), it would otherwise wait
// for the next progress line, or be lost to a SIGKILL. `partial` marks an epoch cut short by
// --max-steps, whose numbers cover only its first batches.
inline std::string epoch_title(int64_t epoch, bool partial, int64_t done, int64_t batches) {
  std::string t = "epoch " + std::to_string(epoch + 1);
  if (partial) t += " (partial: " + std::to_string(done) + " of " + std::to_string(batches) + " batches, --max-steps)";
  return t;
}

// For the text examples: the vocabulary saved as vocab.txt beside the checkpoint at `ckpt_path`
// must give every token the id that the one built now gives it, or the embedding rows would mean
// other tokens. Prints what to pass the same (`flags`) and returns false when they differ.
inline bool vocabulary_matches_checkpoint(const data::Vocabulary& vocab, const std::string& ckpt_path,
                                          const std::string& program, const std::string& flags) {
  const std::filesystem::path saved = std::filesystem::path(ckpt_path).parent_path() / "vocab.txt";
  if (!std::filesystem::exists(saved) || vocab.same_ids_as(data::Vocabulary::load(saved.string()))) return true;
  std::fflush(stdout);  // what came before the error, before it
  std::fprintf(stderr, "%s: the vocabulary built now differs from the checkpoint's %s: use the same %s.\n",
               program.c_str(), saved.c_str(), flags.c_str());
  return false;
}

}  // namespace ember::examples
