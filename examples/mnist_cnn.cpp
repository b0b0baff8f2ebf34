// Trains the MNIST CNN (models/mnist_cnn.h) on MNIST, or on Fashion-MNIST when MNIST is not
// there, with a progress bar, a CSV metrics log, evaluation after every epoch and checkpoints
// that resume exactly. SIGTERM/SIGINT write a checkpoint and exit with status 75 ("preempted"),
// which is how the scheduler stops and later resumes a job.
//
// With --data-parallel it is one rank of a data-parallel job started by `mpirun -np N` or
// `ember launch -n N`: every rank takes its share of each global batch, gradients are averaged
// across ranks while backward runs (scheduler/parallel/ddp.h), and rank 0 prints and writes the model.
#include "models/mnist_cnn.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "common/flags.h"
#include "common/progress.h"
#include "common/training.h"
#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/mnist.h"
#include "layers/checkpoint.h"
#ifdef EMBER_HAVE_DIST
#include "scheduler/parallel/comm_mpi.h"
#ifdef EMBER_HAVE_NCCL
#include "scheduler/parallel/comm_nccl.h"
#endif
#include "scheduler/parallel/ddp.h"
#include "scheduler/parallel/ddp_checkpoint.h"
#include "scheduler/parallel/ddp_split.h"
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
                        "Trains the MNIST CNN (3 conv + 2 linear layers) with Adam; without --data it falls back\n"
                        "to Fashion-MNIST when data/mnist holds no MNIST files. Example: mnist_cnn --epochs 5");
  std::string data_dir = flags.str("data", examples::kDefaultMnistDir,
                                   "directory holding the four MNIST IDX files (left out: Fashion-MNIST when "
                                   "data/mnist has none)");
  const bool data_given = flags.given("data");
  int64_t epochs = flags.integer_min("epochs", 5, 1, "passes over the training set");
  int64_t batch = flags.integer_min("batch-size", 64, 1, "examples per step");
  double lr = flags.positive("lr", 1e-3, "Adam learning rate");
  int64_t seed = flags.integer("seed", 0, "seed for weights, shuffling and everything random");
  std::string device = flags.device("device", "auto", "auto, cpu, cuda or cuda:N");
  std::string ckpt_dir = flags.str("checkpoint-dir", "", "write a checkpoint and metrics.csv here (empty: none)");
  std::string resume = flags.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
  bool overwrite = flags.boolean("overwrite", false, "start afresh in a checkpoint-dir that holds a checkpoint");
  int64_t max_steps = flags.count_or_none("max-steps", 0, "no limit", "stop after this many optimizer steps in total");
  int64_t limit = flags.count_or_none("limit", 1, "all", "use only the first N training and test examples");
  int64_t workers = flags.integer_in("workers", 1, 0, examples::kMaxWorkers, "data-loader worker threads");
  int64_t threads = flags.integer_in("threads", 0, 0, examples::kMaxThreads, "CPU threads for the math (0: all cores)");
  std::string log_path =
      flags.str("log", "", "metrics file (CSV); empty: checkpoint-dir/metrics.csv, or none without checkpoint-dir");
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
  if (resume == "auto" && ckpt_dir.empty()) flags.fail("--resume auto needs --checkpoint-dir");
  if (log_path.empty() && !ckpt_dir.empty()) log_path = (fs::path(ckpt_dir) / "metrics.csv").string();

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
    const auto [root, name] = examples::find_mnist_data(data_dir, data_given);
    // After the data: bad data leave no empty folder behind. Every rank checks its own view.
    examples::prepare_output_dir(flags, "checkpoint-dir", ckpt_dir, resume.empty(), overwrite);
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
    // What a resume must share with its checkpoint (examples::check_resume_settings).
    std::map<std::string, std::string> meta = examples::resume_settings(lr, seed, batch, limit, root);
    meta["model"] = "MnistCnn";
    meta["data"] = name;
    TrainingPosition pos;
    bool resumed = false;
    examples::RunningSums running;  // the sums of the epoch a mid-epoch checkpoint stopped in
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
        examples::check_resume_settings(path, r.metadata, meta);
        if (pos.loader_batch > 0) running = examples::get_running(r.metadata);
        loader.set_position({pos.loader_epoch, pos.loader_batch});
        pos.epoch = pos.loader_epoch;
        resumed = true;
        examples::print_resumed(path, pos, loader.batches_per_epoch(),
                                r.resharded ? " (resharded to a new number of ranks)" : "");
#endif
      } else {
        std::map<std::string, std::string> file_meta;
        std::tie(pos, file_meta) = load_training(path, state);
        EMBER_CHECK(pos.world_size <= 1 || reshard, "--resume ", path, ": written by a data-parallel job of ",
                    pos.world_size,
                    " ranks; resume it with --data-parallel on as many ranks, or pass --reshard to continue in "
                    "one process");
        examples::check_resume_settings(path, file_meta, meta);
        if (pos.loader_batch > 0) running = examples::get_running(file_meta);
        loader.set_position({pos.loader_epoch, pos.loader_batch});
        pos.epoch = pos.loader_epoch;
        resumed = true;
        examples::print_resumed(path, pos, loader.batches_per_epoch());
      }
    }
    const std::string last_ckpt = (fs::path(ckpt_dir) / "last.ckpt").string();
    // Writes last.ckpt with the loader's position and, mid-epoch, the epoch's running sums.
    auto checkpoint = [&](const examples::RunningSums& sums) {
      if (ckpt_dir.empty()) return;
      data::LoaderPosition lp = loader.position();
      if (lp.batch >= loader.batches_per_epoch()) lp = {lp.epoch + 1, 0};
      TrainingPosition p = pos;
      p.loader_epoch = lp.epoch;
      p.loader_batch = lp.batch;
      std::map<std::string, std::string> m = meta;
      if (lp.batch > 0) examples::put_running(sums, m);
#ifdef EMBER_HAVE_DIST
      if (comm) {
        dist::save_distributed(ckpt_dir, *comm, state, p, m);
        return;
      }
#endif
      save_training(last_ckpt, state, p, m);
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
    examples::MetricsLog log(chatty ? log_path : "",
                             {"epoch", "step", "train_loss", "train_acc", "test_loss", "test_acc", "seconds"},
                             examples::rows_to_keep(resumed, pos, /*per_epoch=*/true, log_path, ckpt_dir));
    for (; pos.epoch < epochs; ++pos.epoch) {
      examples::ProgressBar bar("epoch " + std::to_string(pos.epoch + 1) + "/" + std::to_string(epochs),
                                loader.batches_per_epoch(), epochs - pos.epoch - 1);
      // A resumed epoch goes on from its checkpoint's sums.
      examples::RunningSums r = std::exchange(running, {});
      double loss_sum = r["loss_sum"];
      int64_t correct = static_cast<int64_t>(r["correct"]), seen = static_cast<int64_t>(r["seen"]);
      const int64_t seen_before = seen;
      auto sums = [&]() -> examples::RunningSums {
        return {{"loss_sum", loss_sum}, {"correct", double(correct)}, {"seen", double(seen)}};
      };
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
        bar.update(loader.position().batch, seen - seen_before,
                   {{"loss", loss_sum / static_cast<double>(seen)},
                    {"acc", static_cast<double>(correct) / static_cast<double>(seen)}});
        if (g_stop) {
          checkpoint(sums());
          std::printf("\nStopped by a signal at step %lld%s; exiting with status %d (preempted).\n",
                      (long long)pos.step,
                      ckpt_dir.empty() ? "" : (" after writing a checkpoint to " + last_ckpt).c_str(),
                      examples::kPreemptedExit);
          std::fflush(stdout);
          return examples::kPreemptedExit;
        }
        if (max_steps >= 0 && pos.step >= max_steps && loader.position().batch < loader.batches_per_epoch()) {
          cut_short = true;
          break;
        }
      }
      const int64_t done = loader.position().batch, batches = loader.batches_per_epoch();
      auto [acc, tloss] = evaluate(net, test_set, dev, 256, comm);
      std::printf("%s: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.1f s\n",
                  examples::epoch_title(pos.epoch, done > 0 && done < batches, done, batches).c_str(),
                  seen ? loss_sum / static_cast<double>(seen) : 0.0,
                  seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0, tloss, acc, bar.elapsed());
      std::fflush(stdout);
      log.row({{"epoch", double(pos.epoch + 1)},
               {"step", double(pos.step)},
               {"train_loss", seen ? loss_sum / static_cast<double>(seen) : 0.0},
               {"train_acc", seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0},
               {"test_loss", tloss},
               {"test_acc", acc},
               {"seconds", bar.elapsed()}});
      checkpoint(sums());  // the loader's position says where to pick up: mid-epoch or the next epoch
      if (!ckpt_dir.empty()) {
        std::printf("Checkpoint written to %s\n", last_ckpt.c_str());
        std::fflush(stdout);
      }
      if (cut_short || (max_steps >= 0 && pos.step >= max_steps)) break;
    }
    if (!ckpt_dir.empty() && chatty) {
      const std::string model_file = (fs::path(ckpt_dir) / "mnist_cnn.ckpt").string();
      save(net, model_file);
      std::printf("Model written to %s\n", model_file.c_str());
    }
    return 0;
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    std::fprintf(stderr, "mnist_cnn%s: %s\n", comm ? (" rank " + std::to_string(comm->rank())).c_str() : "", e.what());
    return 1;
  }
}
