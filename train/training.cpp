#include "train/training.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "core/blas_kernels.h"
#include "core/cpu_capability.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/mnist.h"
#include "train/accumulate.h"
#include "train/cuda_graph_step.h"
#include "train/precision.h"

namespace ember::train {

std::string device_label(const Device& dev) {
  if (dev.type != DeviceType::CPU) return dev.str();
  const int threads = get_num_threads();
  return dev.str() + " (" + cpu_capability_name(cpu_capability()) + " kernels, " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads") + "; OpenBLAS " + blas_kernels_description() + ")";
}

std::string exact_number(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::pair<std::string, std::string> find_mnist_data(const std::string& dir, bool given) {
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

void prepare_output_dir(const std::string& flag, const std::string& dir, bool fresh, bool overwrite) {
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

std::map<std::string, std::string> resume_settings(double lr, long long seed, long long batch_size, long long limit,
                                                   const std::string& data_root) {
  return {{"flag.lr", exact_number(lr)},
          {"flag.seed", std::to_string(seed)},
          {"flag.batch-size", std::to_string(batch_size)},
          {"flag.limit", std::to_string(limit)},
          {"flag.data", std::filesystem::weakly_canonical(data_root).string()}};
}

TensorBoardFlags::TensorBoardFlags(Flags& f) {
  dir = f.str("tensorboard", "",
              "write TensorBoard event files here (losses, accuracy, learning rate, throughput, samples); "
              "empty: none");
  every = f.integer_in("tensorboard-every", 100, 1, 1000000000,
                       "steps between the weight and gradient histograms in --tensorboard");
}

long long checkpoint_every_flag(Flags& f) {
  return f.integer_in("checkpoint-every", 0, 0, 1000000000000LL,
                      "also write the checkpoint every N optimizer steps within an epoch (0: only at the end of "
                      "each epoch and on SIGTERM)");
}

long long accumulate_flag(Flags& f) {
  return f.integer_in("accumulate", 1, 1, 1000000,
                      "gradient accumulation: run each step's batch as N micro-batches, adding their gradients "
                      "before the one optimizer step (--batch-size stays the step's batch; less memory, the same "
                      "update but for batch norm's statistics)");
}

CommonFlags::CommonFlags(Flags& f, long long epochs_def, long long batch_def, double lr_def, const std::string& name,
                         const CommonFlagsWording& w) {
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
  precision = f.str("precision", "fp32",
                    "fp32, bf16 (matrix products and convolutions in bfloat16 under autocast) or fp16 (float16 "
                    "with loss scaling); docs/PRECISION.md");
  accumulate_declared = w.accumulate;
  if (accumulate_declared) accumulate = accumulate_flag(f);
  cuda_graph = f.boolean("cuda-graph", false,
                         "capture the classifier's forward, loss and backward in a CUDA graph once and replay it each "
                         "step (CUDA devices; not with --data-parallel or --pipeline)");
}

namespace {

// A positive number from the environment variable `name` (set by the daemon for an elastic job);
// `fallback` when unset. An ember::Error naming the variable for anything else.
double elastic_env(const char* name, double fallback, bool integer) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  EMBER_CHECK(*v && *end == '\0' && std::isfinite(d) && d > 0 && (!integer || (d == std::floor(d) && d < 1e12)), name,
              ": expected a positive ", integer ? "integer" : "number", ", got '", v, "'");
  return d;
}

}  // namespace

void CommonFlags::apply_elastic() {
  elastic = std::getenv("EMBER_ELASTIC_RANKS") != nullptr;
  if (!elastic) return;
  base_lr = lr;
  batch_size = static_cast<long long>(elastic_env("EMBER_ELASTIC_BATCH", static_cast<double>(batch_size), true));
  lr = base_lr * elastic_env("EMBER_ELASTIC_LR_SCALE", 1.0, false);
  // A factor on the program's own --accumulate: a job that needed micro-batches to fit keeps them.
  const auto passes = static_cast<long long>(elastic_env("EMBER_ELASTIC_ACCUMULATE", 1.0, true));
  EMBER_CHECK(passes == 1 || accumulate_declared, "EMBER_ELASTIC_ACCUMULATE ", passes,
              ": this program does not accumulate gradients (a GAN's step is two networks'); submit the job "
              "without --max-batch");
  accumulate *= passes;
  EMBER_CHECK(!cuda_graph || accumulate == 1, "EMBER_ELASTIC_ACCUMULATE ", passes,
              ": --cuda-graph captures one forward and backward per step");
  run_accumulation() = accumulate;
}

void CommonFlags::check(Flags& f) {
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    f.fail("--precision must be fp32, bf16 or fp16, got '" + precision + "'");
  run_precision() = Precision::parse(precision);
  cuda_graph_requested() = cuda_graph;
  if (cuda_graph && accumulate > 1)
    f.fail("--cuda-graph captures one forward and backward per step: not with --accumulate " +
           std::to_string(accumulate));
  run_accumulation() = accumulate;
  if (cuda_graph && device != "auto") {  // what the flags alone tell; the rest when the step runs
    try {
      check_cuda_graph(Device(device), false);
    } catch (const Error& e) {
      f.fail(e.what());
    }
  }
  if (resume == "auto" && checkpoint_dir.empty()) f.fail("--resume auto needs --checkpoint-dir");
  init.check(f, resume);
  if (threads > 0) set_num_threads(static_cast<int>(threads));
  if (log.empty() && !checkpoint_dir.empty()) log = (std::filesystem::path(checkpoint_dir) / "metrics.csv").string();
}

void CommonFlags::prepare() {
  apply_elastic();
  std::tie(data_root, data_name) = find_mnist_data(data, data_given);
  prepare_output_dir("checkpoint-dir", checkpoint_dir, resume.empty(), overwrite);
}

std::map<std::string, std::string> CommonFlags::settings() const {
  auto s = resume_settings(lr, seed, batch_size, limit, data_root);
  s["flag.precision"] = precision;  // a resume continues in the checkpoint's precision
  if (elastic) {
    // The daemon chooses an elastic job's batch and learning rate at every start: recorded, not
    // compared (Checkpointer carries the data position and the optimizer's rate over).
    s.erase("flag.batch-size");
    s.erase("flag.lr");
    s["elastic.batch-size"] = std::to_string(batch_size);
    s["elastic.lr"] = exact_number(lr);
  }
  return s;
}

std::atomic<bool>& stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

void install_stop_handlers() {
  std::signal(SIGTERM, [](int) { stop_requested() = true; });
  std::signal(SIGINT, [](int) { stop_requested() = true; });
}

bool reached_max_steps(int64_t step, int64_t max_steps) {
  if (max_steps < 0 || step < max_steps) return false;
  std::printf("At step %lld, --max-steps %lld is reached: nothing to train.\n", (long long)step, (long long)max_steps);
  return true;
}

void check_resume_settings(const std::string& path, const std::map<std::string, std::string>& file,
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

void put_running(const RunningSums& sums, std::map<std::string, std::string>& meta) {
  for (const auto& [k, v] : sums) meta["running." + k] = exact_number(v);
}

RunningSums get_running(const std::map<std::string, std::string>& meta) {
  RunningSums sums;
  for (const auto& [k, v] : meta)
    if (k.rfind("running.", 0) == 0) sums[k.substr(8)] = std::strtod(v.c_str(), nullptr);
  return sums;
}

void print_resumed(const std::string& path, const TrainingPosition& pos, int64_t batches_per_epoch,
                   const std::string& extra) {
  if (pos.loader_batch > 0)
    std::printf("Resumed from %s at step %lld (epoch %lld, %lld of %lld batches done)%s.\n", path.c_str(),
                (long long)pos.step, (long long)pos.loader_epoch + 1, (long long)pos.loader_batch,
                (long long)batches_per_epoch, extra.c_str());
  else
    std::printf("Resumed from %s at step %lld (start of epoch %lld)%s.\n", path.c_str(), (long long)pos.step,
                (long long)pos.loader_epoch + 1, extra.c_str());
}

MetricsLog::Existing existing_log(bool resumed, const TrainingPosition& pos, bool per_epoch, const std::string& log,
                                  const std::string& checkpoint_dir, bool overwrite) {
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

std::string epoch_title(int64_t epoch, bool partial, int64_t done, int64_t batches) {
  std::string t = "epoch " + std::to_string(epoch + 1);
  if (partial) t += " (partial: " + std::to_string(done) + " of " + std::to_string(batches) + " batches, --max-steps)";
  return t;
}

bool vocabulary_matches_checkpoint(const data::Vocabulary& vocab, const std::string& ckpt_path,
                                   const std::string& program, const std::string& flags) {
  const std::filesystem::path saved = std::filesystem::path(ckpt_path).parent_path() / "vocab.txt";
  if (!std::filesystem::exists(saved) || vocab.same_ids_as(data::Vocabulary::load(saved.string()))) return true;
  std::fflush(stdout);  // what came before the error, before it
  std::fprintf(stderr, "%s: the vocabulary built now differs from the checkpoint's %s: use the same %s.\n",
               program.c_str(), saved.c_str(), flags.c_str());
  return false;
}

}  // namespace ember::train
