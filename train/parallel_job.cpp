#include "train/parallel_job.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "core/ops.h"
#include "layers/container.h"
#include "layers/optim/clip_grad.h"
#include "train/accumulate.h"
#include "train/precision.h"
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

namespace ember::train {

#ifdef EMBER_HAVE_DIST
struct ParallelJob::Dist {
  std::unique_ptr<dist::MpiCommunicator> comm;
  std::unique_ptr<dist::Communicator> gpu_comm;
  std::unique_ptr<dist::DataParallel> dp;
  dist::PipelineGrid grid;
  std::unique_ptr<dist::Pipeline> pipe;
  std::optional<dist::DistributedDataParallel::NoSync> held;  // hold_gradients()
};
#else
struct ParallelJob::Dist {};
#endif

int mpi_world_size_from_env() {
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

ParallelFlags::ParallelFlags(Flags& f) {
  on = f.boolean("data-parallel", false,
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

ParallelJob::ParallelJob(std::string program, ParallelFlags flags)
    : program_(std::move(program)), flags_(std::move(flags)) {
#ifdef EMBER_HAVE_DIST
  dist_ = std::make_unique<Dist>();
#endif
}

ParallelJob::~ParallelJob() = default;

Device ParallelJob::start(Device dev) {
  if (!flags_.on && !flags_.pipeline) {
    refuse_unsplit();
    return dev;
  }
  const char* flag = flags_.pipeline ? "--pipeline" : "--data-parallel";
#ifdef EMBER_HAVE_DIST
  if (flags_.pipeline) {
    dist::parse_pipeline_schedule(flags_.schedule);  // a bad --schedule before MPI starts
    EMBER_CHECK(run_accumulation() == 1, "--accumulate ", run_accumulation(),
                ": a pipeline already runs each batch as --micro-batches micro-batches, accumulating their "
                "gradients; set --micro-batches instead");
    EMBER_CHECK(!flags_.speed_weighted && flags_.split.empty(),
                "--pipeline: the replicas take equal shares (--speed-weighted and --split are data-parallel only)");
  }
  // Under Slurm, srun without an MPI plugin starts every task as a world of one: each would
  // train the whole model alone and write the same checkpoint folder.
  EMBER_CHECK(dist::MpiCommunicator::launched_by_mpi(), flag,
              ": start this program with mpirun -np N or ember launch -n N",
              std::getenv("SLURM_JOB_ID") ? ", or under Slurm with srun --mpi=pmix (this task has no MPI rank)" : "");
  dist_->comm = std::make_unique<dist::MpiCommunicator>();
  if (dist_->comm->rank() != 0) std::freopen("/dev/null", "w", stdout);  // rank 0 speaks for the job
  return dev.is_cuda() ? gpu_device() : dev;
#else
  EMBER_FAIL(flag, ": this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
}

void ParallelJob::refuse_unsplit() const {
  const int ranks = mpi_world_size_from_env();
  EMBER_CHECK(ranks <= 1, "started as one of ", ranks,
              " MPI ranks (mpirun -np N / ember launch -n N) without --data-parallel or --pipeline K: each rank "
              "would train the whole model alone and write the same checkpoint and metrics files; add "
              "--data-parallel (or --pipeline K) to split the work over the ranks, or start one process");
}

bool ParallelJob::active() const {
#ifdef EMBER_HAVE_DIST
  return dist_->comm != nullptr;
#else
  return false;
#endif
}

int ParallelJob::rank() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->comm) return dist_->comm->rank();
#endif
  return 0;
}

int ParallelJob::size() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->comm) return dist_->comm->size();
#endif
  return 1;
}

int ParallelJob::shard() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->pipe) return dist_->grid.replica;
#endif
  return rank();
}

int ParallelJob::shards() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->pipe) return dist_->grid.replicas;
#endif
  return size();
}

dist::Pipeline* ParallelJob::pipeline() {
#ifdef EMBER_HAVE_DIST
  return dist_->pipe.get();
#else
  return nullptr;
#endif
}

void ParallelJob::gather_model() {
#ifdef EMBER_HAVE_DIST
  if (dist_->pipe) dist_->pipe->gather_model();
#endif
}

double ParallelJob::clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
#ifdef EMBER_HAVE_DIST
  if (dist_->pipe)
    return optim::clip_grad_norm_(params, max_norm, 2.0, false, [&](double part, bool is_max) {
      Tensor t = full({1}, part, {.dtype = DType::Float64});
      dist_->comm->all_reduce(t, is_max ? dist::ReduceOp::Max : dist::ReduceOp::Sum, "gradient norm")->wait();
      return is_max ? t.item() : t.item() / dist_->grid.replicas;
    });
#endif
  return optim::clip_grad_norm_(params, max_norm);
}

std::vector<Tensor> ParallelJob::parameters(nn::Module& model) {
#ifdef EMBER_HAVE_DIST
  if (dist_->pipe) return dist_->pipe->parameters();
#endif
  return model.parameters();
}

void ParallelJob::wrap(nn::Module& model, int64_t global_batch, uint64_t seed, Shape example_shape,
                       DType example_dtype) {
#ifdef EMBER_HAVE_DIST
  if (!dist_->comm) return;
  if (flags_.pipeline) return wrap_pipeline(model, global_batch, seed, std::move(example_shape), example_dtype);
  dist_->dp = std::make_unique<dist::DataParallel>(
      model, *dist_->comm, global_batch,
      dist::DataParallelOptions{
          .ddp = {.bucket_cap_mb = flags_.bucket_mb, .overlap = flags_.overlap, .gradient_as_bucket_view = true},
          .split = {.speed_weighted = flags_.speed_weighted},
          .weights = flags_.split,
          // An elastic job under the daemon reports its noise scale (docs/scheduler/elastic.md).
          .measure_noise = std::getenv("EMBER_ELASTIC_RANKS") != nullptr},
      dist_->gpu_comm ? dist_->gpu_comm.get() : nullptr);
  manual_seed(seed * 1000003ULL + static_cast<uint64_t>(dist_->comm->rank()));
#else
  (void)model, (void)global_batch, (void)seed, (void)example_shape, (void)example_dtype;
#endif
}

data::LoaderOptions ParallelJob::loader_options(data::LoaderOptions o) const {
#ifdef EMBER_HAVE_DIST
  if (dist_
          ->pipe) {  // every stage of a replica reads the replica's batches: the first its inputs, the last its targets
    o.drop_last = true;
    o.rank = dist_->grid.replica;
    o.world_size = dist_->grid.replicas;
    return o;
  }
  if (!dist_->dp) return o;
  o.drop_last = true;
  o.rank = dist_->dp->rank();
  o.world_size = dist_->dp->size();
  o.shard_weights = dist_->dp->shard_weights();
#endif
  return o;
}

Tensor ParallelJob::forward(nn::Module& model, const Tensor& x) {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->forward(x);
#endif
  return model(x);
}

void ParallelJob::hold_gradients() {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp && !dist_->held) dist_->held.emplace(dist_->dp->ddp());
#endif
}

void ParallelJob::release_gradients() {
#ifdef EMBER_HAVE_DIST
  dist_->held.reset();
#endif
}

Tensor ParallelJob::weight(Tensor loss) const {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->weight(std::move(loss));
#endif
  return loss;
}

double ParallelJob::loss_weight() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->loss_weight();
#endif
  return 1.0;
}

bool ParallelJob::end_step(data::DataLoader& loader, bool stop) {
#ifdef EMBER_HAVE_DIST
  if (dist_->pipe) return sum({stop ? 1.0 : 0.0})[0] > 0;
  if (!dist_->dp) return stop;
  if (dist_->dp->end_step()) {
    loader.set_shard_weights(dist_->dp->shard_weights());
    loader.set_position(loader.position());
    std::printf("\n");  // below the progress bar
    print_summary();
  }
  return dist_->dp->any(stop);
#else
  (void)loader;
  return stop;
#endif
}

std::optional<double> ParallelJob::noise_scale() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->noise_scale();
#endif
  return std::nullopt;
}

double ParallelJob::exposed_sync_seconds() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->exposed_sync_seconds();
#endif
  return 0;
}

void ParallelJob::print_summary() const {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) std::printf("%s\n", dist_->dp->summary().c_str());
  if (dist_->pipe)
    std::printf("Pipeline: %d stages x %d replicas, %lld micro-batches per step, %s%s; rank 0 is %s\n",
                dist_->grid.stages, dist_->grid.replicas, flags_.micro_batches, flags_.schedule.c_str(),
                flags_.recompute ? ", recomputing" : "", dist_->pipe->describe().c_str());
#endif
}

std::vector<double> ParallelJob::sum(std::vector<double> values) {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->sum(values);
  if (dist_->pipe) {  // over the whole job: in a pipeline only the last stages hold what is summed
    Tensor t = empty({static_cast<int64_t>(values.size())}, {.dtype = DType::Float64});
    std::copy(values.begin(), values.end(), t.data_ptr<double>());
    dist_->comm->all_reduce(t, dist::ReduceOp::Sum, "sum")->wait();
    return t.to_vector<double>();
  }
#endif
  return values;
}

void ParallelJob::save(const std::string& dir, const TrainingState& state, const TrainingPosition& pos,
                       const std::map<std::string, std::string>& meta) {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) return dist_->dp->save(dir, state, pos, meta);
  if (dist_->pipe)
    return dist::save_pipeline(dir, *dist_->pipe, {nullptr, state.optimizers, state.generators, state.schedulers}, pos,
                               meta);
#endif
  (void)dir, (void)state, (void)pos, (void)meta;
  EMBER_FAIL("save: not a data-parallel job");
}

std::tuple<TrainingPosition, std::map<std::string, std::string>, bool> ParallelJob::load(const std::string& dir,
                                                                                         const TrainingState& state) {
#ifdef EMBER_HAVE_DIST
  if (dist_->dp) {
    dist::DistributedResume r = dist_->dp->load(dir, state, flags_.reshard);
    return {r.position, r.metadata, r.resharded};
  }
  if (dist_->pipe) {
    dist::DistributedResume r = dist::load_pipeline(
        dir, *dist_->pipe, {nullptr, state.optimizers, state.generators, state.schedulers}, flags_.reshard);
    return {r.position, r.metadata, r.resharded};
  }
#endif
  (void)dir, (void)state;
  EMBER_FAIL("load: not a data-parallel job");
}

int ParallelJob::fail(const std::exception& e) const {
  return report_failure(active() ? program_ + " rank " + std::to_string(rank()) : program_, e);
}

// One GPU per rank on every node (or shared, see NcclCommunicator), or every rank on the CPU: the ranks agree first, so
// that a node with fewer GPUs than ranks trains on the CPU instead of failing. MPI also carries the small exchanges on
// every kind of rank.
Device ParallelJob::gpu_device() {
#if defined(EMBER_HAVE_DIST) && defined(EMBER_HAVE_NCCL)
  // Several ranks may share a GPU under NCCL's opt-in (NCCL_MULTI_RANK_GPU_ENABLE=1).
  Tensor short_of_gpus = full({1}, dist::NcclCommunicator::node_has_devices_for(dist_->comm->local_size()) ? 0.0 : 1.0);
  dist_->comm->all_reduce(short_of_gpus, dist::ReduceOp::Max, "gpu count")->wait();
  if (short_of_gpus.item() == 0) {
    auto nccl = std::make_unique<dist::NcclCommunicator>(*dist_->comm);
    const Device dev = nccl->device();
    dist_->gpu_comm = std::move(nccl);
    return dev;
  }
  std::printf("A node has fewer GPUs than ranks: the data-parallel ranks train on the CPU over MPI.\n");
#else
  std::printf("This build has no NCCL: the data-parallel ranks train on the CPU over MPI.\n");
#endif
  return Device::cpu();
}

void ParallelJob::wrap_pipeline(nn::Module& model, int64_t global_batch, uint64_t seed, Shape example_shape,
                                DType example_dtype) {
#ifdef EMBER_HAVE_DIST
  auto* seq = dynamic_cast<nn::Sequential*>(&model);
  EMBER_CHECK(seq, "--pipeline: the model (", model.type_name(), ") must be an nn::Sequential to be cut into stages");
  // Between GPU ranks activations, gradients and the replicas' all-reduces go through NCCL.
  dist::Communicator& comm = dist_->gpu_comm ? *dist_->gpu_comm : static_cast<dist::Communicator&>(*dist_->comm);
  dist::PipelineGrid& grid = dist_->grid;
  grid = dist::make_pipeline_grid(comm, static_cast<int>(flags_.pipeline));
  EMBER_CHECK(global_batch % grid.replicas == 0, "--pipeline: the global batch of ", global_batch,
              " does not split evenly over ", grid.replicas, " replicas");
  const int layers = static_cast<int>(seq->size());
  EMBER_CHECK(layers >= grid.stages, "--pipeline ", grid.stages, ": the model has only ", layers, " layers");
  const std::vector<int> bounds = plan_stages(*seq, global_batch, example_shape, example_dtype);
  dist_->pipe = std::make_unique<dist::Pipeline>(
      *seq, bounds, comm,
      dist::PipelineOptions{.micro_batches = static_cast<int>(flags_.micro_batches),
                            .schedule = dist::parse_pipeline_schedule(flags_.schedule),
                            .recompute = flags_.recompute,
                            .stage_ranks = grid.stage_ranks,
                            .data_parallel = grid.replicas_comm.get(),
                            .ddp = {.bucket_cap_mb = flags_.bucket_mb, .overlap = flags_.overlap},
                            .autocast = run_precision().dtype(),
                            .scaler = run_precision().scaler()});
  dist_->pipe->stage_module().set_fusion(seq->fusion());  // the stage's layers run as the model's would
  manual_seed(seed * 1000003ULL + static_cast<uint64_t>(dist_->comm->rank()));
#else
  (void)model, (void)global_batch, (void)seed, (void)example_shape, (void)example_dtype;
#endif
}

// Rank 0 profiles the layers on one micro-batch and plans (profiles differ from rank to rank: one
// plan for all), the others receive its boundaries.
std::vector<int> ParallelJob::plan_stages(nn::Sequential& seq, int64_t global_batch, const Shape& example_shape,
                                          DType example_dtype) {
#ifdef EMBER_HAVE_DIST
  const dist::PipelineGrid& grid = dist_->grid;
  const int k = grid.stages, layers = static_cast<int>(seq.size());
  Tensor b = empty({k}, {.dtype = DType::Int64});
  for (int s = 0; s < k; ++s) b.data_ptr<int64_t>()[s] = s * layers / k;
  if (!example_shape.empty() && dist_->comm->rank() == 0) {
    const int64_t micro = std::max<int64_t>(1, global_batch / grid.replicas / flags_.micro_batches);
    Shape shape = {micro};
    shape.insert(shape.end(), example_shape.begin(), example_shape.end());
    const Device dev = dist_->gpu_comm ? dist_->gpu_comm->device() : Device::cpu();
    const auto costs = dist::profile_layers(seq, zeros(shape, {.dtype = example_dtype, .device = dev}));
    const dist::PipelinePlan plan = dist::plan_pipeline(costs, std::vector<dist::DeviceSpec>(static_cast<size_t>(k)),
                                                        {.schedule = dist::parse_pipeline_schedule(flags_.schedule),
                                                         .micro_batches = static_cast<int>(flags_.micro_batches),
                                                         .recompute = flags_.recompute});
    const std::vector<int> cuts = plan.boundaries();
    for (int s = 0; s < k; ++s) b.data_ptr<int64_t>()[s] = cuts[static_cast<size_t>(s)];
    if (flags_.pipeline_plan) std::printf("%s", plan.table(costs).c_str());
  }
  dist_->comm->broadcast(b, 0, "pipeline plan")->wait();
  std::vector<int> out;
  for (int64_t v : b.to_vector<int64_t>()) out.push_back(static_cast<int>(v));
  return out;
#else
  (void)seq, (void)global_batch, (void)example_shape, (void)example_dtype;
  return {};
#endif
}

}  // namespace ember::train
