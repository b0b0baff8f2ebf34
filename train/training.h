// What every training program shares beyond flags and progress: the standard flags (data, epochs,
// batch size, learning rate, seed, device, checkpoints, resume, max steps, ...), finding MNIST or
// falling back to Debian's Fashion-MNIST, stopping cleanly on SIGINT/SIGTERM, and the bookkeeping
// of checkpoints and resumes (settings that must match, running sums, which log rows stay). The
// loop that uses them is trainer.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/device.h"
#include "data/loader_limits.h"
#include "data/vocabulary.h"
#include "layers/checkpoint.h"
#include "train/flags.h"
#include "train/init_from.h"
#include "train/progress.h"

namespace ember::train {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kPreemptedExit = 75;  // EX_TEMPFAIL: the scheduler resumes the job later
// Bounds of --workers and --threads (Flags::integer_in): a typo must not start 100,000 threads.
// The workers' is the data library's, which model files check data.workers against too.
using data::kMaxWorkers;
inline constexpr long long kMaxThreads = 1024;

// The device as the start-up line names it: on the CPU with the kernels' capability level, the
// math threads and OpenBLAS's kernels ("cpu (avx2 kernels, 2 threads; OpenBLAS Haswell)"), so a
// log says what the numbers were measured on. An unusable EMBER_CPU_CAPABILITY throws here, with
// its reason, before training starts.
std::string device_label(const Device& dev);

// `v` in the fewest digits that read back as exactly `v` (0.0002, not 0.00020000000000000001):
// checkpoint metadata compare and print this.
std::string exact_number(double v);

// The MNIST folder used when --data is not given.
inline constexpr const char* kDefaultMnistDir = "data/mnist";

// The MNIST files for --data `dir`; returns (root, name). Fashion-MNIST from Debian's package
// stands in only when --data was left out and the default folder (data/mnist) holds none of the
// four files, with a notice on stderr; a --data given, whatever folder it names, must hold the
// four files, else an ember::Error names what is missing (a typo once trained on Fashion-MNIST
// with status 0).
std::pair<std::string, std::string> find_mnist_data(const std::string& dir, bool given);

// The output folder of --<flag> (a checkpoint dir): refuses, before any training, a path that is
// not a folder, cannot be created or cannot be written (an existing /proc/self was once found only
// at the first checkpoint, after a whole epoch), and a fresh run (no --resume) into a folder that
// already holds a checkpoint unless `overwrite`: that used to replace last.ckpt and append to the
// old metrics.csv without a word. Each is an ember::Error (exit status 1): the flags are well
// formed, the folder is what is wrong, and the flag list would only push the message off the
// screen. Call it once the data are found, so that bad data leave no empty folder behind.
void prepare_output_dir(const std::string& flag, const std::string& dir, bool fresh, bool overwrite);

// The "flag.*" checkpoint metadata that a resume must match (check_resume_settings): the
// settings that the checkpoint's optimizer state and data order depend on.
std::map<std::string, std::string> resume_settings(double lr, long long seed, long long batch_size, long long limit,
                                                   const std::string& data_root);

// How a program words some of the common flags' help (mnist_cnn keeps its own wording and
// writes no checkpoint unless asked).
struct CommonFlagsWording {
  std::string lr = "learning rate";
  std::string seed = "seed for weights, shuffling, noise and everything random";
  std::optional<std::string> checkpoint_dir;  // the default; nullopt: runs/<name>
  std::string checkpoint_dir_help = "checkpoints, metrics.csv and sample grids go here; empty: none";
  // Declares --accumulate (train/accumulate.h); the GAN loops do not, their step being two networks'.
  bool accumulate = true;
};

// --accumulate N, which the classifier and language-model programs take.
long long accumulate_flag(Flags& f);

// --tensorboard DIR and --tensorboard-every N, which every training program takes (Trainer writes
// the logs).
struct TensorBoardFlags {
  std::string dir;
  long long every = 100;
  TensorBoardFlags() = default;
  explicit TensorBoardFlags(Flags& f);
};

// --checkpoint-every, which every training program takes.
long long checkpoint_every_flag(Flags& f);

// The flags every training program takes; defaults differ per program.
struct CommonFlags {
  std::string data, device, checkpoint_dir, resume, log;
  std::string precision;  // --precision: fp32, bf16 or fp16 (train/precision.h)
  long long epochs, batch_size, seed, max_steps, checkpoint_every, limit, workers, threads;
  long long accumulate = 1;  // --accumulate: micro-batches per step (train/accumulate.h)
  bool accumulate_declared = false;
  double lr;
  bool data_given, overwrite;
  bool cuda_graph = false;  // --cuda-graph: the classifier's step captured and replayed (train/cuda_graph_step.h)
  // Run by the daemon as an elastic job (EMBER_ELASTIC_RANKS set): the global batch is
  // EMBER_ELASTIC_BATCH (else --batch-size), the learning rate --lr x EMBER_ELASTIC_LR_SCALE and
  // the micro-batches per step EMBER_ELASTIC_ACCUMULATE (else --accumulate)
  // (docs/scheduler/elastic.md). Applied by prepare().
  bool elastic = false;
  double base_lr = 0;
  std::string data_root, data_name;  // set by prepare()
  TensorBoardFlags tensorboard;
  InitFrom init;  // --init-from, --init-skip

  CommonFlags(Flags& f, long long epochs_def, long long batch_def, double lr_def, const std::string& name,
              const CommonFlagsWording& w = {});
  // Checks what the flags alone can tell (exit 2) and applies --threads.
  void check(Flags& f);
  // Under the daemon as an elastic job: its batch and learning rate from the environment (an
  // ember::Error naming the variable when one is not a positive number).
  void apply_elastic();
  // Applies an elastic job's settings, finds the data (an ember::Error when --data lacks them),
  // then prepares --checkpoint-dir (prepare_output_dir), in that order.
  void prepare();
  // The settings a resume must share with its checkpoint (Checkpointer compares them).
  std::map<std::string, std::string> settings() const;
  Device dev() const { return device == "auto" ? Device::best() : Device(device); }
};

// Set by SIGINT/SIGTERM; the loops checkpoint and exit with kPreemptedExit when they see it.
std::atomic<bool>& stop_requested();
void install_stop_handlers();

// A run whose position already reaches --max-steps (a job resumed after it finished, or
// --max-steps 0) trains nothing: it says so and the caller ends, leaving the checkpoint and the
// log as they are. Checked only after a step, the limit would let such a run take one more.
bool reached_max_steps(int64_t step, int64_t max_steps);

// Settings a checkpoint was written with that differ from this run's: the flags ("flag.<name>"
// metadata) and what a model file sets ("setting.<field>": its optimizers, schedules and layers,
// tools/train.cpp). A resume keeps the checkpoint's optimizer state and data order, so a new --lr,
// --seed or weight_decay would be silently ignored, a new --data or --batch-size would continue at
// the wrong example, and a layer without weights (a dropout) added or changed would go unnoticed.
// An ember::Error that lists every difference; a key missing on either side (an older
// checkpoint) is not compared.
void check_resume_settings(const std::string& path, const std::map<std::string, std::string>& file,
                           const std::map<std::string, std::string>& now);

// An epoch's running sums (what its summary and metrics row average over) as checkpoint metadata
// ("running.<name>"), so that an epoch resumed mid-way reports the whole epoch, not only the
// steps after the resume.
using RunningSums = std::map<std::string, double>;
void put_running(const RunningSums& sums, std::map<std::string, std::string>& meta);
RunningSums get_running(const std::map<std::string, std::string>& meta);

// "Resumed from PATH at step S (epoch E, B of N batches done)." Epochs count from 1, as the
// progress bar and the summaries do.
void print_resumed(const std::string& path, const TrainingPosition& pos, int64_t batches_per_epoch,
                   const std::string& extra = "");

// What a metrics log does with an existing file. A resumed run keeps the rows up to its
// checkpoint: a run killed after writing rows but before its next checkpoint writes them again
// (SIGKILL once left the GAN's steps 210 and 220 twice), and with `per_epoch` the row of the epoch
// in progress goes too (a --max-steps stop wrote it for part of the epoch; the resumed run
// writes it for the whole). A fresh run restarts the checkpoint folder's own metrics.csv (the
// folder held no checkpoint, or --overwrite was given), and a --log elsewhere only with
// `overwrite`: without it, a log that holds rows is another run's and is refused.
MetricsLog::Existing existing_log(bool resumed, const TrainingPosition& pos, bool per_epoch, const std::string& log,
                                  const std::string& checkpoint_dir, bool overwrite);

// An epoch summary ends with a flush: with stdout a file (`sched logs`), it would otherwise wait
// for the next progress line, or be lost to a SIGKILL. `partial` marks an epoch cut short by
// --max-steps, whose numbers cover only its first batches.
std::string epoch_title(int64_t epoch, bool partial, int64_t done, int64_t batches);

// For the text programs: the vocabulary saved as vocab.txt beside the checkpoint at `ckpt_path`
// must give every token the id that the one built now gives it, or the embedding rows would mean
// other tokens. Prints what to pass the same (`flags`) and returns false when they differ.
bool vocabulary_matches_checkpoint(const data::Vocabulary& vocab, const std::string& ckpt_path,
                                   const std::string& program, const std::string& flags);

}  // namespace ember::train
