// The parallel side of an example (mnist_cnn --data-parallel, --pipeline K): its flags, joining the
// MPI job (a communicator per kind of traffic, one device per rank, rank 0 speaking for the job),
// the model wrapped in dist::DataParallel (dist/data_parallel.h) or cut into a
// dist::Pipeline of K stages times N/K data-parallel replicas (dist/pipeline.h), the
// loader sharded by the batch splitter or by replica, the per-step agreements, and the job's
// checkpoints. A single process
// (no --data-parallel, or a build without MPI) gets the same calls as no-ops, so that the
// training loop (trainer.h) is written once; this is the one file that knows whether the build
// has MPI (EMBER_HAVE_DIST, set by examples/CMakeLists.txt for the programs linked to it).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/flags.h"
#include "core/ops.h"
#include "data/dataloader.h"
#include "layers/checkpoint.h"
#include "layers/module.h"
#include "layers/optim/clip_grad.h"
#ifdef EMBER_HAVE_DIST
#include "dist/comm_mpi.h"
#include "dist/data_parallel.h"
#include "dist/pipeline.h"
#include "dist/pipeline_checkpoint.h"
#include "dist/pipeline_grid.h"
#include "dist/pipeline_plan.h"
#ifdef EMBER_HAVE_NCCL
#include "dist/comm_nccl.h"
#endif
#endif

namespace ember::examples {

// The number of ranks of the MPI job this process was started as one of, from what the launchers
// set: Open MPI's mpirun (and so ember launch), MPICH's Hydra and Slurm's PMI-2, Slurm's srun
// under PMIx; 1 outside an MPI job. The environment, not MPI itself, so that a build without MPI
// sees it too and a single process never starts MPI.
inline int mpi_world_size_from_env() {
  auto size_in = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : 0;
  };
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const int n = size_in(name); n > 0) return n;
  if (std::getenv("PMIX_RANK"))
    if (const int n = size_in("SLURM_STEP_NUM_TASKS"); n > 0) return n;
  return 1;
}

// The data-parallel flags, declared after an example's own.
struct ParallelFlags {
  bool on, speed_weighted, overlap, reshard;
  std::vector<double> split;
  double bucket_mb;
  long long pipeline, micro_batches;
  std::string schedule;
  bool recompute, pipeline_plan;

  explicit ParallelFlags(Flags& f) {
    on =
        f.boolean("data-parallel", false,
                  "run as one rank of an MPI job (mpirun -np N / ember launch -n N); --batch-size is the global batch");
    speed_weighted = f.boolean("speed-weighted", false,
                               "data-parallel: split each batch by the ranks' measured speed (default: equal)");
    split = f.reals("split", "data-parallel: fixed relative shares per rank, e.g. 1,2 (default: equal)");
    overlap = f.boolean("overlap", true, "data-parallel: all-reduce gradient buckets while backward runs");
    bucket_mb = f.real("bucket-mb", 25.0, "data-parallel: gradient bucket size in MB");
    reshard =
        f.boolean("reshard", false, "resume a checkpoint written by another number of ranks (one process included)");
    pipeline = f.integer_min("pipeline", 0, 0,
                             "cut the model into K pipeline stages over the job's N ranks (ember launch -n N; N/K "
                             "data-parallel replicas); 0: no pipeline");
    micro_batches = f.integer_min("micro-batches", 4, 1, "pipeline: micro-batches per step");
    schedule = f.str("schedule", "1f1b", "pipeline: gpipe (all forwards, then all backwards) or 1f1b");
    recompute = f.boolean("recompute", false, "pipeline: recompute each stage's forward in backward (less memory)");
    pipeline_plan = f.boolean("pipeline-plan", false,
                              "pipeline: print the plan (each stage's layers, time and memory) before training");
  }
};

class ParallelJob {
 public:
  // `program` names the example in error messages.
  explicit ParallelJob(std::string program, ParallelFlags flags)
      : program_(std::move(program)), flags_(std::move(flags)) {}

  // With --data-parallel: joins the MPI job (an ember::Error unless started by mpirun or ember
  // launch), silences stdout on ranks > 0 and returns the device this rank trains on; else `dev`.
  // Without either, under an MPI job of several ranks: an ember::Error (see refuse_unsplit).
  Device start(Device dev) {
    if (!flags_.on && !flags_.pipeline) {
      refuse_unsplit();
      return dev;
    }
    const char* flag = flags_.pipeline ? "--pipeline" : "--data-parallel";
#ifdef EMBER_HAVE_DIST
    if (flags_.pipeline) {
      dist::parse_pipeline_schedule(flags_.schedule);  // a bad --schedule before MPI starts
      EMBER_CHECK(!flags_.speed_weighted && flags_.split.empty(),
                  "--pipeline: the replicas take equal shares (--speed-weighted and --split are data-parallel only)");
    }
    // Under Slurm, srun without an MPI plugin starts every task as a world of one: each would
    // train the whole model alone and write the same checkpoint folder.
    EMBER_CHECK(dist::MpiCommunicator::launched_by_mpi(), flag,
                ": start this program with mpirun -np N or ember launch -n N",
                std::getenv("SLURM_JOB_ID") ? ", or under Slurm with srun --mpi=pmix (this task has no MPI rank)" : "");
    comm_ = std::make_unique<dist::MpiCommunicator>();
    if (comm_->rank() != 0) std::freopen("/dev/null", "w", stdout);  // rank 0 speaks for the job
    return dev.is_cuda() ? gpu_device() : dev;
#else
    EMBER_FAIL(flag, ": this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
  }
  // Several ranks not asked to split the work would each train the whole model alone and write the
  // same checkpoint and metrics files, racing. Refused rather than made data-parallel by default:
  // what a run does then depends on its flags, never on how it was started.
  void refuse_unsplit() const {
    const int ranks = mpi_world_size_from_env();
    EMBER_CHECK(ranks <= 1, "started as one of ", ranks,
                " MPI ranks (mpirun -np N / ember launch -n N) without --data-parallel or --pipeline K: each rank "
                "would train the whole model alone and write the same checkpoint and metrics files; add "
                "--data-parallel (or --pipeline K) to split the work over the ranks, or start one process");
  }
  // Joined an MPI job (start() with --data-parallel).
  bool active() const {
#ifdef EMBER_HAVE_DIST
    return comm_ != nullptr;
#else
    return false;
#endif
  }
  int rank() const {
#ifdef EMBER_HAVE_DIST
    if (comm_) return comm_->rank();
#endif
    return 0;
  }
  int size() const {
#ifdef EMBER_HAVE_DIST
    if (comm_) return comm_->size();
#endif
    return 1;
  }
  bool chatty() const {
    return rank() == 0;
  }
  bool reshard() const {
    return flags_.reshard;
  }
  // This rank's part of the data: its data-parallel rank, or its replica in a pipeline job.
  int shard() const {
#ifdef EMBER_HAVE_DIST
    if (pipe_) return grid_.replica;
#endif
    return rank();
  }
  int shards() const {
#ifdef EMBER_HAVE_DIST
    if (pipe_) return grid_.replicas;
#endif
    return size();
  }
#ifdef EMBER_HAVE_DIST
  // The pipeline this rank is a stage of (--pipeline), or null.
  dist::Pipeline* pipeline() {
    return pipe_.get();
  }
#endif
  // In a pipeline: the stages' current weights into rank 0's whole model, before it writes the
  // model (a collective). Elsewhere nothing: every rank already holds the whole model.
  void gather_model() {
#ifdef EMBER_HAVE_DIST
    if (pipe_) pipe_->gather_model();
#endif
  }
  // Clips the gradients of `params` (what this rank trains) to a total norm of `max_norm` over
  // the whole model, as one process would: in a pipeline the stages' parts of the norm are added
  // up over the job (every replica holds the same averaged gradients, so the sum over all ranks is
  // the replica count times the model's). Returns the norm before clipping.
  double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
#ifdef EMBER_HAVE_DIST
    if (pipe_)
      return optim::clip_grad_norm_(params, max_norm, 2.0, false, [&](double part, bool is_max) {
        Tensor t = full({1}, part, {.dtype = DType::Float64});
        comm_->all_reduce(t, is_max ? dist::ReduceOp::Max : dist::ReduceOp::Sum, "gradient norm")->wait();
        return is_max ? t.item() : t.item() / grid_.replicas;
      });
#endif
    return optim::clip_grad_norm_(params, max_norm);
  }
  // The parameters this rank trains: its stage's in a pipeline, else all of the model's.
  std::vector<Tensor> parameters(nn::Module& model) {
#ifdef EMBER_HAVE_DIST
    if (pipe_) return pipe_->parameters();
#endif
    return model.parameters();
  }

  // Wraps `model` (already on its device) for data-parallel training: rank 0's weights go to
  // every rank, and each rank then draws its own random stream (augmentation, dropout).
  // With --pipeline the model (an nn::Sequential, the same on every rank) is cut into stages
  // instead, and the stages' replicas average their gradients; given the shape of one example
  // (without the batch dimension) and its dtype (int64 for token ids), the cuts come from
  // profiling each layer (pipeline_plan.h), else every stage gets an equal number of layers.
  void wrap(nn::Module& model, int64_t global_batch, uint64_t seed, Shape example_shape = {},
            DType example_dtype = DType::Float32) {
#ifdef EMBER_HAVE_DIST
    if (!comm_) return;
    if (flags_.pipeline) return wrap_pipeline(model, global_batch, seed, std::move(example_shape), example_dtype);
    dp_ = std::make_unique<dist::DataParallel>(
        model, *comm_, global_batch,
        dist::DataParallelOptions{
            .ddp = {.bucket_cap_mb = flags_.bucket_mb, .overlap = flags_.overlap, .gradient_as_bucket_view = true},
            .split = {.speed_weighted = flags_.speed_weighted},
            .weights = flags_.split},
        gpu_comm_ ? gpu_comm_.get() : nullptr);
    manual_seed(seed * 1000003ULL + static_cast<uint64_t>(comm_->rank()));
#else
    (void)model, (void)global_batch, (void)seed, (void)example_shape, (void)example_dtype;
#endif
  }
  // This rank's loader: its share of every global batch, and every global batch full, so that
  // every step's shares are exactly the splitter's.
  data::LoaderOptions loader_options(data::LoaderOptions o) const {
#ifdef EMBER_HAVE_DIST
    if (pipe_) {  // every stage of a replica reads the replica's batches: the first its inputs, the last its targets
      o.drop_last = true;
      o.rank = grid_.replica;
      o.world_size = grid_.replicas;
      return o;
    }
    if (!dp_) return o;
    o.drop_last = true;
    o.rank = dp_->rank();
    o.world_size = dp_->size();
    o.shard_weights = dp_->shard_weights();
#endif
    return o;
  }

  Tensor forward(nn::Module& model, const Tensor& x) {
#ifdef EMBER_HAVE_DIST
    if (dp_) return dp_->forward(x);
#endif
    return model(x);
  }
  // The loss to call backward on (data-parallel: weighted by this rank's share), and the factor
  // that undoes it for display.
  Tensor weight(Tensor loss) const {
#ifdef EMBER_HAVE_DIST
    if (dp_) return dp_->weight(std::move(loss));
#endif
    return loss;
  }
  double loss_weight() const {
#ifdef EMBER_HAVE_DIST
    if (dp_) return dp_->loss_weight();
#endif
    return 1.0;
  }

  // After every optimizer step, on every rank: new shares go to the loader (dropping batches
  // prefetched with the old ones), and the ranks agree on `stop` before anyone stops.
  bool end_step(data::DataLoader& loader, bool stop) {
#ifdef EMBER_HAVE_DIST
    if (pipe_) return sum({stop ? 1.0 : 0.0})[0] > 0;
    if (!dp_) return stop;
    if (dp_->end_step()) {
      loader.set_shard_weights(dp_->shard_weights());
      loader.set_position(loader.position());
      std::printf("\n");  // below the progress bar
      print_summary();
    }
    return dp_->any(stop);
#else
    (void)loader;
    return stop;
#endif
  }
  void print_summary() const {
#ifdef EMBER_HAVE_DIST
    if (dp_) std::printf("%s\n", dp_->summary().c_str());
    if (pipe_)
      std::printf("Pipeline: %d stages x %d replicas, %lld micro-batches per step, %s%s; rank 0 is %s\n", grid_.stages,
                  grid_.replicas, flags_.micro_batches, flags_.schedule.c_str(),
                  flags_.recompute ? ", recomputing" : "", pipe_->describe().c_str());
#endif
  }
  // Each value summed over the ranks (an evaluation's sums over the ranks' shards).
  std::vector<double> sum(std::vector<double> values) {
#ifdef EMBER_HAVE_DIST
    if (dp_) return dp_->sum(values);
    if (pipe_) {  // over the whole job: in a pipeline only the last stages hold what is summed
      Tensor t = empty({static_cast<int64_t>(values.size())}, {.dtype = DType::Float64});
      std::copy(values.begin(), values.end(), t.data_ptr<double>());
      comm_->all_reduce(t, dist::ReduceOp::Sum, "sum")->wait();
      return t.to_vector<double>();
    }
#endif
    return values;
  }

  // The job's checkpoint in `dir` (last.ckpt and a file per rank); only when active().
  void save(const std::string& dir, const TrainingState& state, const TrainingPosition& pos,
            const std::map<std::string, std::string>& meta) {
#ifdef EMBER_HAVE_DIST
    if (dp_) return dp_->save(dir, state, pos, meta);
    if (pipe_)
      return dist::save_pipeline(dir, *pipe_, {nullptr, state.optimizers, state.generators, state.schedulers}, pos,
                                 meta);
#endif
    (void)dir, (void)state, (void)pos, (void)meta;
    EMBER_FAIL("save: not a data-parallel job");
  }
  // Returns the position, the metadata and whether the checkpoint came from another world size.
  std::tuple<TrainingPosition, std::map<std::string, std::string>, bool> load(const std::string& dir,
                                                                              const TrainingState& state) {
#ifdef EMBER_HAVE_DIST
    if (dp_) {
      dist::DistributedResume r = dp_->load(dir, state, flags_.reshard);
      return {r.position, r.metadata, r.resharded};
    }
    if (pipe_) {
      dist::DistributedResume r = dist::load_pipeline(
          dir, *pipe_, {nullptr, state.optimizers, state.generators, state.schedulers}, flags_.reshard);
      return {r.position, r.metadata, r.resharded};
    }
#endif
    (void)dir, (void)state;
    EMBER_FAIL("load: not a data-parallel job");
  }

  // What main's catch prints ("mnist_cnn rank 1: ..." in a data-parallel job); returns status 1.
  int fail(const std::exception& e) const {
    return report_failure(active() ? program_ + " rank " + std::to_string(rank()) : program_, e);
  }

 private:
#ifdef EMBER_HAVE_DIST
  // Gradients travel through NCCL between GPU ranks (each on cuda:<local rank>) and through MPI
  // between CPU ranks; MPI also carries the small exchanges on every kind of rank. One GPU per
  // rank on every node, or every rank on the CPU: the ranks agree first, so that a node with
  // fewer GPUs than ranks trains on the CPU instead of failing.
  Device gpu_device() {
#ifdef EMBER_HAVE_NCCL
    Tensor short_of_gpus = full({1}, cuda_device_count() < comm_->local_size() ? 1.0 : 0.0);
    comm_->all_reduce(short_of_gpus, dist::ReduceOp::Max, "gpu count")->wait();
    if (short_of_gpus.item() == 0) {
      auto nccl = std::make_unique<dist::NcclCommunicator>(*comm_);
      const Device dev = nccl->device();
      gpu_comm_ = std::move(nccl);
      return dev;
    }
    std::printf("A node has fewer GPUs than ranks: the data-parallel ranks train on the CPU over MPI.\n");
#else
    std::printf("This build has no NCCL: the data-parallel ranks train on the CPU over MPI.\n");
#endif
    return Device::cpu();
  }

  void wrap_pipeline(nn::Module& model, int64_t global_batch, uint64_t seed, Shape example_shape, DType example_dtype) {
    auto* seq = dynamic_cast<nn::Sequential*>(&model);
    EMBER_CHECK(seq, "--pipeline: the model (", model.type_name(), ") must be an nn::Sequential to be cut into stages");
    // Between GPU ranks activations, gradients and the replicas' all-reduces go through NCCL.
    dist::Communicator& comm = gpu_comm_ ? *gpu_comm_ : static_cast<dist::Communicator&>(*comm_);
    grid_ = dist::make_pipeline_grid(comm, static_cast<int>(flags_.pipeline));
    EMBER_CHECK(global_batch % grid_.replicas == 0, "--pipeline: the global batch of ", global_batch,
                " does not split evenly over ", grid_.replicas, " replicas");
    const int layers = static_cast<int>(seq->size());
    EMBER_CHECK(layers >= grid_.stages, "--pipeline ", grid_.stages, ": the model has only ", layers, " layers");
    const std::vector<int> bounds = plan_stages(*seq, global_batch, example_shape, example_dtype);
    pipe_ = std::make_unique<dist::Pipeline>(
        *seq, bounds, comm,
        dist::PipelineOptions{.micro_batches = static_cast<int>(flags_.micro_batches),
                              .schedule = dist::parse_pipeline_schedule(flags_.schedule),
                              .recompute = flags_.recompute,
                              .stage_ranks = grid_.stage_ranks,
                              .data_parallel = grid_.replicas_comm.get(),
                              .ddp = {.bucket_cap_mb = flags_.bucket_mb, .overlap = flags_.overlap}});
    pipe_->stage_module().set_fusion(seq->fusion());  // the stage's layers run as the model's would
    manual_seed(seed * 1000003ULL + static_cast<uint64_t>(comm_->rank()));
  }

  // Where the stages start. Rank 0 profiles the layers on one micro-batch and plans (profiles
  // differ from rank to rank: one plan for all), the others receive its boundaries.
  std::vector<int> plan_stages(nn::Sequential& seq, int64_t global_batch, const Shape& example_shape,
                               DType example_dtype) {
    const int k = grid_.stages, layers = static_cast<int>(seq.size());
    Tensor b = empty({k}, {.dtype = DType::Int64});
    for (int s = 0; s < k; ++s) b.data_ptr<int64_t>()[s] = s * layers / k;
    if (!example_shape.empty() && comm_->rank() == 0) {
      const int64_t micro = std::max<int64_t>(1, global_batch / grid_.replicas / flags_.micro_batches);
      Shape shape = {micro};
      shape.insert(shape.end(), example_shape.begin(), example_shape.end());
      const Device dev = gpu_comm_ ? gpu_comm_->device() : Device::cpu();
      const auto costs = dist::profile_layers(seq, zeros(shape, {.dtype = example_dtype, .device = dev}));
      const dist::PipelinePlan plan = dist::plan_pipeline(costs, std::vector<dist::DeviceSpec>(static_cast<size_t>(k)),
                                                          {.schedule = dist::parse_pipeline_schedule(flags_.schedule),
                                                           .micro_batches = static_cast<int>(flags_.micro_batches),
                                                           .recompute = flags_.recompute});
      const std::vector<int> cuts = plan.boundaries();
      for (int s = 0; s < k; ++s) b.data_ptr<int64_t>()[s] = cuts[static_cast<size_t>(s)];
      if (flags_.pipeline_plan) std::printf("%s", plan.table(costs).c_str());
    }
    comm_->broadcast(b, 0, "pipeline plan")->wait();
    std::vector<int> out;
    for (int64_t v : b.to_vector<int64_t>()) out.push_back(static_cast<int>(v));
    return out;
  }

  std::unique_ptr<dist::MpiCommunicator> comm_;
  std::unique_ptr<dist::Communicator> gpu_comm_;
  std::unique_ptr<dist::DataParallel> dp_;
  dist::PipelineGrid grid_;
  std::unique_ptr<dist::Pipeline> pipe_;
#endif
  std::string program_;
  ParallelFlags flags_;
};

}  // namespace ember::examples
