// Trains the MNIST CNN (models/mnist_cnn.h) on MNIST, or on Fashion-MNIST when MNIST is not
// there, with a progress bar, a CSV metrics log, evaluation after every epoch and checkpoints
// that resume exactly. SIGTERM/SIGINT write a checkpoint and exit with status 75 ("preempted"),
// which is how the scheduler stops and later resumes a job.
//
// With --data-parallel it is one rank of a data-parallel job started by `mpirun -np N` or
// `ember launch -n N`: every rank takes its share of each global batch, gradients are averaged
// across ranks while backward runs (scheduler/dist/ddp.h), and rank 0 prints and writes the model.
#include "models/mnist_cnn.h"

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "common/flags.h"
#include "common/progress.h"
#include "common/training.h"
#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "layers/checkpoint.h"
#ifdef EMBER_HAVE_DIST
#include "scheduler/dist/comm_mpi.h"
#ifdef EMBER_HAVE_NCCL
#include "scheduler/dist/comm_nccl.h"
#endif
#include "scheduler/dist/ddp.h"
#include "scheduler/dist/ddp_checkpoint.h"
#include "scheduler/dist/ddp_split.h"
#endif

using namespace ember;
namespace fs = std::filesystem;

namespace {

#ifdef EMBER_HAVE_DIST
using CommPtr = std::unique_ptr<dist::MpiCommunicator>;
#else
struct NoComm {
  int rank() const { return 0; }
  int size() const { return 1; }
};
using CommPtr = std::unique_ptr<NoComm>;
#endif

// Accuracy and mean loss of `net` over a dataset (data-parallel: each rank evaluates its shard
// and the sums are added up across ranks).
std::pair<double, double> evaluate(models::MnistCnn& net, const data::Dataset& ds, Device dev, int64_t batch,
                                   const CommPtr& comm) {
  NoGradGuard ng;
  net.eval();
  int world = comm ? comm->size() : 1;
  data::DataLoader loader(
      ds, {.batch_size = batch * world, .shuffle = false, .rank = comm ? comm->rank() : 0, .world_size = world});
  int64_t correct = 0, total = 0;
  double loss_sum = 0;
  for (auto& [x, y] : loader) {
    Tensor logits = net(x.to(dev));
    Tensor yd = y.to(dev);
    loss_sum += cross_entropy(logits, yd, {.reduction = Reduction::Sum}).item();
    correct += sum(eq(argmax(logits, 1), yd)).item<int64_t>();
    total += y.numel();
  }
#ifdef EMBER_HAVE_DIST
  if (comm) {
    Tensor sums = empty({3}, {.dtype = DType::Float64});
    double* d = sums.data_ptr<double>();
    d[0] = loss_sum, d[1] = static_cast<double>(correct), d[2] = static_cast<double>(total);
    comm->all_reduce(sums, dist::ReduceOp::Sum, "evaluation")->wait();
    loss_sum = d[0], correct = static_cast<int64_t>(d[1]), total = static_cast<int64_t>(d[2]);
  }
#endif
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
  int64_t workers = flags.integer_in("workers", 1, 0, examples::kMaxWorkers, "data-loader worker threads");
  int64_t threads = flags.integer_in("threads", 0, 0, examples::kMaxThreads, "CPU threads for the math (0: all cores)");
  std::string log_path = flags.str("log", "", "append per-epoch metrics to this CSV file");
  bool data_parallel = flags.boolean("data-parallel", false,
                                     "run as one rank of an MPI job (mpirun -np N / ember launch -n N); "
                                     "--batch-size is the global batch");
  bool speed_weighted = flags.boolean("speed-weighted", false,
                                      "data-parallel: split each batch by the ranks' measured speed (default: equal)");
  std::vector<double> split_weights =
      flags.reals("split", "data-parallel: fixed relative shares per rank, e.g. 1,2 (default: equal)");
  bool overlap = flags.boolean("overlap", true, "data-parallel: all-reduce gradient buckets while backward runs");
  double bucket_mb = flags.real("bucket-mb", 25.0, "data-parallel: gradient bucket size in MB");
  bool reshard =
      flags.boolean("reshard", false, "resume a checkpoint written by another number of ranks (one process included)");
  flags.finish();
  if (epochs < 1 || batch < 1 || lr <= 0) flags.fail("--epochs, --batch-size and --lr must be positive");

  CommPtr comm;
  try {
    if (data_parallel) {
#ifdef EMBER_HAVE_DIST
      EMBER_CHECK(dist::MpiCommunicator::launched_by_mpi(),
                  "--data-parallel: start this program with mpirun -np N or ember launch -n N");
      comm = std::make_unique<dist::MpiCommunicator>();
#else
      EMBER_FAIL("--data-parallel: this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
    }
    const bool chatty = !comm || comm->rank() == 0;
    if (!chatty) std::freopen("/dev/null", "w", stdout);  // rank 0 speaks for the job
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    Device dev = device == "auto" ? Device::best() : Device(device);
#ifdef EMBER_HAVE_DIST
    // Gradients travel through NCCL between GPU ranks (each on cuda:<local rank>) and through MPI
    // between CPU ranks; MPI also carries the small exchanges (evaluation sums, the stop flag,
    // the batch-split timings, checkpoint barriers) on every kind of rank.
    std::unique_ptr<dist::Communicator> gpu_comm;
    if (comm && dev.is_cuda()) {
#ifdef EMBER_HAVE_NCCL
      // One GPU per rank (cuda:<local rank>) on every node, or every rank on the CPU: the ranks
      // agree first, so that a node with fewer GPUs than ranks trains on the CPU instead of failing.
      Tensor short_of_gpus = full({1}, cuda_device_count() < comm->local_size() ? 1.0 : 0.0);
      comm->all_reduce(short_of_gpus, dist::ReduceOp::Max, "gpu count")->wait();
      if (short_of_gpus.item() == 0) {
        auto nccl = std::make_unique<dist::NcclCommunicator>(*comm);
        dev = nccl->device();
        gpu_comm = std::move(nccl);
      } else {
        std::printf("A node has fewer GPUs than ranks: the data-parallel ranks train on the CPU over MPI.\n");
        dev = Device::cpu();
      }
#else
      std::printf("This build has no NCCL: the data-parallel ranks train on the CPU over MPI.\n");
      dev = Device::cpu();
#endif
    }
    dist::Communicator* grad_comm = gpu_comm ? gpu_comm.get() : comm.get();
#endif
    const auto found = examples::find_mnist_data(data_dir, "mnist_cnn");
    if (!found) return 1;
    const auto& [root, name] = *found;
    data::MnistOptions mopts{.normalize = std::make_pair(0.1307, 0.3081), .transform = nullptr, .limit = limit};
    data::MNIST train_set(root, data::Split::Train, mopts);
    data::MNIST test_set(root, data::Split::Test, mopts);

    manual_seed(static_cast<uint64_t>(seed));
    models::MnistCnn net;
    net.to(dev);
#ifdef EMBER_HAVE_DIST
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::unique_ptr<dist::BatchSplitter> split;
#endif
    data::LoaderOptions lopts{.batch_size = batch,
                              .shuffle = true,
                              .workers = static_cast<int>(workers),
                              .seed = static_cast<uint64_t>(seed)};
#ifdef EMBER_HAVE_DIST
    if (comm) {
      ddp = std::make_unique<dist::DistributedDataParallel>(
          net, *grad_comm,
          dist::DdpOptions{.bucket_cap_mb = bucket_mb, .overlap = overlap, .gradient_as_bucket_view = true});
      split = std::make_unique<dist::BatchSplitter>(*comm, batch, dist::SplitOptions{.speed_weighted = speed_weighted});
      if (!split_weights.empty()) split->set_weights(split_weights);
      // Every global batch is full, so every step's shares are exactly the splitter's.
      lopts.drop_last = true;
      lopts.rank = comm->rank();
      lopts.world_size = comm->size();
      lopts.shard_weights = split->shard_weights();
      // Each rank its own random stream (augmentation, dropout); the weights came from rank 0.
      manual_seed(static_cast<uint64_t>(seed) * 1000003ULL + static_cast<uint64_t>(comm->rank()));
    }
#else
    (void)speed_weighted, (void)overlap, (void)bucket_mb, (void)reshard, (void)split_weights;
#endif
    optim::Adam opt(net.parameters(), {.lr = lr});
    data::DataLoader loader(train_set, lopts);
    TrainingState state{&net, {&opt}, {{"default", &default_generator()}}};
    TrainingPosition pos;
    if (!resume.empty()) {
      std::string path = resume == "auto" ? (fs::path(ckpt_dir) / "last.ckpt").string() : resume;
      if (resume == "auto" && !fs::exists(path)) {
        std::printf("No checkpoint at %s yet: starting from scratch.\n", path.c_str());
      } else if (comm) {
#ifdef EMBER_HAVE_DIST
        // A data-parallel checkpoint is a folder: last.ckpt and one file per rank beside it.
        EMBER_CHECK(resume == "auto" || fs::path(resume).filename() == "last.ckpt", "--resume ", resume,
                    ": a data-parallel run resumes from a checkpoint folder's last.ckpt (or auto)");
        dist::DistributedResume r = dist::load_distributed(
            resume == "auto" ? ckpt_dir : fs::path(resume).parent_path().string(), *comm, state, reshard);
        pos = r.position;
        loader.set_position({pos.loader_epoch, pos.loader_batch});
        pos.epoch = pos.loader_epoch;
        std::printf("Resumed from %s at epoch %lld, step %lld%s.\n", path.c_str(), (long long)pos.epoch,
                    (long long)pos.step, r.resharded ? " (resharded to a new number of ranks)" : "");
#endif
      } else {
        pos = load_training(path, state).first;
        EMBER_CHECK(pos.world_size <= 1 || reshard, "--resume ", path, ": written by a data-parallel job of ",
                    pos.world_size,
                    " ranks; resume it with --data-parallel on as many ranks, or pass --reshard to continue in "
                    "one process");
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
#ifdef EMBER_HAVE_DIST
      if (comm) {
        dist::save_distributed(ckpt_dir, *comm, state, p, {{"model", "MnistCnn"}, {"data", name}});
        return;
      }
#endif
      save_training((fs::path(ckpt_dir) / "last.ckpt").string(), state, p, {{"model", "MnistCnn"}, {"data", name}});
    };
    examples::install_stop_handlers();
    std::atomic<bool>& g_stop = examples::stop_requested();

    std::printf("Training MnistCnn on %s (%lld examples) on %s: %lld epochs, batch %lld, Adam lr %g\n", name.c_str(),
                (long long)train_set.size(), examples::device_label(dev).c_str(), (long long)epochs, (long long)batch,
                lr);
#ifdef EMBER_HAVE_DIST
    auto print_shares = [&] {
      std::string s;
      for (int64_t v : split->shares()) {
        if (!s.empty()) s += '/';
        s += std::to_string(v);
      }
      std::printf("Data-parallel over %d ranks: shares of each batch %s, %zu gradient buckets (%s)%s\n", comm->size(),
                  s.c_str(), ddp->bucket_layout().size(), grad_comm->backend().c_str(), overlap ? "" : ", overlap off");
    };
    if (comm) print_shares();
#endif
    if (examples::reached_max_steps(pos.step, max_steps)) return 0;
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
        Tensor logits, loss;
        double loss_scale = 1.0;  // undoes the data-parallel weighting for display
#ifdef EMBER_HAVE_DIST
        if (comm) {
          split->begin_compute();
          logits = ddp->forward(xd);
          // Weighted so the ranks' averaged gradient is the global batch's (unequal shares).
          loss = cross_entropy(logits, yd).mul_(split->loss_weight());
          loss_scale = 1.0 / split->loss_weight();
          opt.zero_grad();
          loss.backward();
          split->end_compute(ddp->last_timeline().last_grad);
        }
#endif
        if (!comm) {
          logits = net(xd);
          loss = cross_entropy(logits, yd);
          opt.zero_grad();
          loss.backward();
        }
        opt.step();
        ++pos.step;
#ifdef EMBER_HAVE_DIST
        if (comm) {
          if (split->end_step()) {
            loader.set_shard_weights(split->shard_weights());
            loader.set_position(loader.position());  // drop batches prefetched with the old shares
            std::printf("\n");                       // below the progress bar
            print_shares();
          }
          // A signal reaches the ranks at different steps: they agree before anyone stops.
          Tensor stop = full({1}, g_stop ? 1.0 : 0.0);
          comm->all_reduce(stop, dist::ReduceOp::Max, "stop flag")->wait();
          if (stop.item() > 0) g_stop = true;
        }
#endif
        loss_sum += loss.item() * loss_scale * static_cast<double>(y.numel());
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
                      (long long)pos.step, ckpt_dir.empty() ? "" : " after writing a checkpoint",
                      examples::kPreemptedExit);
          return examples::kPreemptedExit;
        }
        if (max_steps >= 0 && pos.step >= max_steps && loader.position().batch < loader.batches_per_epoch()) {
          cut_short = true;
          break;
        }
      }
      auto [acc, tloss] = evaluate(net, test_set, dev, 256, comm);
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
    if (!ckpt_dir.empty() && chatty) save(net, (fs::path(ckpt_dir) / "mnist_cnn.ckpt").string());
    return 0;
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    std::fprintf(stderr, "mnist_cnn%s: %s\n", comm ? (" rank " + std::to_string(comm->rank())).c_str() : "", e.what());
    return 1;
  }
}
