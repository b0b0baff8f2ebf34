// Trains the MNIST CNN (models/mnist_cnn.h) on MNIST, or on Fashion-MNIST when MNIST is not
// there, with a progress bar, a CSV metrics log, evaluation after every epoch and checkpoints
// that resume exactly. SIGTERM/SIGINT write a checkpoint and exit with status 75 ("preempted"),
// which is how the scheduler stops and later resumes a job.
#include "models/mnist_cnn.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "common/flags.h"
#include "common/progress.h"
#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "layers/checkpoint.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
constexpr int kPreemptedExit = 75;  // EX_TEMPFAIL: "try again later"

const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

// Accuracy and mean loss of `net` over a dataset.
std::pair<double, double> evaluate(models::MnistCnn& net, const data::Dataset& ds, Device dev, int64_t batch) {
  NoGradGuard ng;
  net.eval();
  data::DataLoader loader(ds, {.batch_size = batch, .shuffle = false});
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  for (auto& [x, y] : loader) {
    Tensor logits = net(x.to(dev));
    Tensor yd = y.to(dev);
    loss_sum += cross_entropy(logits, yd, {.reduction = Reduction::Sum}).item();
    correct += sum(eq(argmax(logits, 1), yd)).item<int64_t>();
    total += y.numel();
  }
  net.train();
  return {total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0,
          total ? loss_sum / static_cast<double>(total) : 0.0};
}

}  // namespace

int main(int argc, char** argv) {
  examples::Flags flags(argc, argv,
                        "Trains the MNIST CNN (3 conv + 2 linear layers) with Adam; falls back to Fashion-MNIST\n"
                        "when --data holds no MNIST files. Example: mnist_cnn --epochs 5 --data data/mnist");
  std::string data_dir = flags.str("data", "data/mnist", "directory holding the four MNIST IDX files");
  int64_t epochs = flags.integer("epochs", 5, "passes over the training set");
  int64_t batch = flags.integer("batch-size", 64, "examples per step");
  double lr = flags.real("lr", 1e-3, "Adam learning rate");
  int64_t seed = flags.integer("seed", 0, "seed for weights, shuffling and everything random");
  std::string device = flags.str("device", "auto", "cpu, cuda, cuda:N or auto");
  std::string ckpt_dir = flags.str("checkpoint-dir", "", "write a checkpoint here after every epoch (empty: none)");
  std::string resume = flags.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
  int64_t max_steps = flags.integer("max-steps", -1, "stop after this many optimizer steps in total (-1: no limit)");
  int64_t limit = flags.integer("limit", -1, "use only the first N training and test examples (-1: all)");
  int64_t workers = flags.integer("workers", 1, "data-loader worker threads");
  int64_t threads = flags.integer("threads", 0, "CPU threads for the math (0: all cores)");
  std::string log_path = flags.str("log", "", "append per-epoch metrics to this CSV file");
  flags.finish();
  if (epochs < 1 || batch < 1 || lr <= 0 || workers < 0 || threads < 0)
    flags.fail("--epochs, --batch-size and --lr must be positive; --workers and --threads non-negative");

  try {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    Device dev = device == "auto" ? Device::best() : Device(device);
    std::string root = data_dir, name = "MNIST";
    if (!data::MNIST::available(root)) {
      if (data::MNIST::available(kFashionDir)) {
        std::printf(
            "No MNIST files in '%s' (run scripts/download-mnist.sh where there is internet).\n"
            "Training on Fashion-MNIST from %s instead.\n",
            root.c_str(), kFashionDir);
        root = kFashionDir;
        name = "Fashion-MNIST";
      } else {
        std::fprintf(stderr,
                     "mnist_cnn: no MNIST files in '%s' and no Fashion-MNIST in %s.\n"
                     "Run scripts/download-mnist.sh (needs internet) or scripts/setup.sh (installs Debian's\n"
                     "dataset-fashion-mnist), or pass --data DIR with the four IDX files.\n",
                     root.c_str(), kFashionDir);
        return 1;
      }
    }
    data::MnistOptions mopts{.normalize = std::make_pair(0.1307, 0.3081), .transform = nullptr, .limit = limit};
    data::MNIST train_set(root, data::Split::Train, mopts);
    data::MNIST test_set(root, data::Split::Test, mopts);

    manual_seed(static_cast<uint64_t>(seed));
    models::MnistCnn net;
    net.to(dev);
    optim::Adam opt(net.parameters(), {.lr = lr});
    data::DataLoader loader(train_set, {.batch_size = batch,
                                        .shuffle = true,
                                        .workers = static_cast<int>(workers),
                                        .seed = static_cast<uint64_t>(seed)});
    TrainingState state{&net, {&opt}, {{"default", &default_generator()}}};
    TrainingPosition pos;
    if (!resume.empty()) {
      std::string path = resume == "auto" ? (fs::path(ckpt_dir) / "last.ckpt").string() : resume;
      if (resume == "auto" && !fs::exists(path)) {
        std::printf("No checkpoint at %s yet: starting from scratch.\n", path.c_str());
      } else {
        pos = load_training(path, state).first;
        loader.set_position({pos.loader_epoch, pos.loader_batch});
        pos.epoch = pos.loader_epoch;
        std::printf("Resumed from %s at epoch %lld, step %lld.\n", path.c_str(), (long long)pos.epoch,
                    (long long)pos.step);
      }
    }
    if (!ckpt_dir.empty()) fs::create_directories(ckpt_dir);
    auto checkpoint = [&] {
      if (ckpt_dir.empty()) return;
      data::LoaderPosition lp = loader.position();
      TrainingPosition p = pos;
      p.loader_epoch = lp.epoch;
      p.loader_batch = lp.batch;
      save_training((fs::path(ckpt_dir) / "last.ckpt").string(), state, p, {{"model", "MnistCnn"}, {"data", name}});
    };
    std::signal(SIGTERM, [](int) { g_stop = true; });
    std::signal(SIGINT, [](int) { g_stop = true; });

    std::printf("Training MnistCnn on %s (%lld examples) on %s: %lld epochs, batch %lld, Adam lr %g\n", name.c_str(),
                (long long)train_set.size(), dev.str().c_str(), (long long)epochs, (long long)batch, lr);
    examples::MetricsLog log(log_path,
                             {"epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc", "seconds"});
    for (; pos.epoch < epochs; ++pos.epoch) {
      examples::ProgressBar bar("epoch " + std::to_string(pos.epoch + 1) + "/" + std::to_string(epochs),
                                loader.batches_per_epoch());
      double loss_sum = 0;
      int64_t correct = 0, seen = 0;
      bool cut_short = false;
      for (auto& [x, y] : loader) {
        Tensor xd = x.to(dev), yd = y.to(dev);
        Tensor logits = net(xd);
        Tensor loss = cross_entropy(logits, yd);
        opt.zero_grad();
        loss.backward();
        opt.step();
        ++pos.step;
        loss_sum += loss.item() * static_cast<double>(y.numel());
        {
          NoGradGuard ng;
          correct += sum(eq(argmax(logits, 1), yd)).item<int64_t>();
        }
        seen += y.numel();
        bar.update(loader.position().batch, seen,
                   {{"loss", loss_sum / static_cast<double>(seen)},
                    {"acc", static_cast<double>(correct) / static_cast<double>(seen)}});
        if (g_stop) {
          checkpoint();
          std::printf("\nStopped by a signal at step %lld%s; exiting with status %d (preempted).\n",
                      (long long)pos.step, ckpt_dir.empty() ? "" : " after writing a checkpoint", kPreemptedExit);
          return kPreemptedExit;
        }
        if (max_steps >= 0 && pos.step >= max_steps && loader.position().batch < loader.batches_per_epoch()) {
          cut_short = true;
          break;
        }
      }
      auto [acc, tloss] = evaluate(net, test_set, dev, 256);
      std::printf("epoch %lld: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s\n", (long long)pos.epoch + 1,
                  seen ? loss_sum / static_cast<double>(seen) : 0.0,
                  seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0, tloss, acc, bar.elapsed());
      log.row({{"epoch", double(pos.epoch + 1)},
               {"step", double(pos.step)},
               {"train_loss", seen ? loss_sum / static_cast<double>(seen) : 0.0},
               {"train_acc", seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0},
               {"test_loss", tloss},
               {"test_acc", acc},
               {"seconds", bar.elapsed()}});
      checkpoint();  // the loader's position says where to pick up: mid-epoch or the next epoch
      if (cut_short || (max_steps >= 0 && pos.step >= max_steps)) break;
    }
    if (!ckpt_dir.empty()) save(net, (fs::path(ckpt_dir) / "mnist_cnn.ckpt").string());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "mnist_cnn: %s\n", e.what());
    return 1;
  }
}
