// The parallel side of a training program (mnist_cnn --data-parallel, --pipeline K; lstm_lm;
// `ember train`): its flags, joining the MPI job (a communicator per kind of traffic, one device per
// rank, rank 0 speaking for the job), the model wrapped in dist::DataParallel (dist/data_parallel.h)
// or cut into a dist::Pipeline of K stages times N/K data-parallel replicas (dist/pipeline.h), the
// loader sharded by the batch splitter or by replica, the per-step agreements, and the job's
// checkpoints. A single process (no --data-parallel, or a build without MPI) gets the same calls as
// no-ops, so that the training loop (trainer.h) is written once. Whether the build has MPI is
// decided inside the library (parallel_job.cpp, EMBER_HAVE_DIST): this header is the same either
// way, so a program using it needs no definition of its own.
#pragma once

#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/tensor.h"
#include "data/dataloader.h"
#include "layers/checkpoint.h"
#include "layers/module.h"
#include "train/flags.h"

namespace ember::dist {
class Pipeline;
}  // namespace ember::dist

namespace ember::nn {
class Sequential;
}  // namespace ember::nn

namespace ember::train {

// The number of ranks of the MPI job this process was started as one of, from what the launchers
// set: Open MPI's mpirun (and so ember launch), MPICH's Hydra and Slurm's PMI-2, Slurm's srun
// under PMIx; 1 outside an MPI job. The environment, not MPI itself, so that a build without MPI
// sees it too and a single process never starts MPI.
int mpi_world_size_from_env();

// The data-parallel flags, declared after a program's own.
struct ParallelFlags {
  bool on, speed_weighted, overlap, reshard;
  std::vector<double> split;
  double bucket_mb;
  long long pipeline, micro_batches;
  std::string schedule;
  bool recompute, pipeline_plan;

  explicit ParallelFlags(Flags& f);
};

class ParallelJob {
 public:
  // `program` names the program in error messages.
  ParallelJob(std::string program, ParallelFlags flags);
  ~ParallelJob();
  ParallelJob(const ParallelJob&) = delete;
  ParallelJob& operator=(const ParallelJob&) = delete;

  // With --data-parallel: joins the MPI job (an ember::Error unless started by mpirun or ember
  // launch), silences stdout on ranks > 0 and returns the device this rank trains on; else `dev`.
  // Without either, under an MPI job of several ranks: an ember::Error (see refuse_unsplit).
  Device start(Device dev);
  // Several ranks not asked to split the work would each train the whole model alone and write the
  // same checkpoint and metrics files, racing. Refused rather than made data-parallel by default:
  // what a run does then depends on its flags, never on how it was started.
  void refuse_unsplit() const;
  // Joined an MPI job (start() with --data-parallel).
  bool active() const;
  int rank() const;
  int size() const;
  bool chatty() const { return rank() == 0; }
  bool reshard() const { return flags_.reshard; }
  // This rank's part of the data: its data-parallel rank, or its replica in a pipeline job.
  int shard() const;
  int shards() const;
  // The pipeline this rank is a stage of (--pipeline), or null (always null without MPI).
  dist::Pipeline* pipeline();
  // In a pipeline: the stages' current weights into rank 0's whole model, before it writes the
  // model (a collective). Elsewhere nothing: every rank already holds the whole model.
  void gather_model();
  // Clips the gradients of `params` (what this rank trains) to a total norm of `max_norm` over
  // the whole model, as one process would: in a pipeline the stages' parts of the norm are added
  // up over the job (every replica holds the same averaged gradients, so the sum over all ranks is
  // the replica count times the model's). Returns the norm before clipping.
  double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
  // The parameters this rank trains: its stage's in a pipeline, else all of the model's.
  std::vector<Tensor> parameters(nn::Module& model);

  // Wraps `model` (already on its device) for data-parallel training: rank 0's weights go to
  // every rank, and each rank then draws its own random stream (augmentation, dropout).
  // With --pipeline the model (an nn::Sequential, the same on every rank) is cut into stages
  // instead, and the stages' replicas average their gradients; given the shape of one example
  // (without the batch dimension) and its dtype (int64 for token ids), the cuts come from
  // profiling each layer (pipeline_plan.h), else every stage gets an equal number of layers.
  void wrap(nn::Module& model, int64_t global_batch, uint64_t seed, Shape example_shape = {},
            DType example_dtype = DType::Float32);
  // This rank's loader: its share of every global batch, and every global batch full, so that
  // every step's shares are exactly the splitter's.
  data::LoaderOptions loader_options(data::LoaderOptions o) const;

  Tensor forward(nn::Module& model, const Tensor& x);
  // Gradient accumulation (train/accumulate.h): while held, a data-parallel rank's backward passes
  // only add to its own gradients; the first backward after release() all-reduces the sum. The
  // step's compute timing (speed-weighted shares) spans all its micro-batches. Nothing elsewhere.
  void hold_gradients();
  void release_gradients();
  // The loss to call backward on (data-parallel: weighted by this rank's share), and the factor
  // that undoes it for display.
  Tensor weight(Tensor loss) const;
  double loss_weight() const;

  // After every optimizer step, on every rank: new shares go to the loader (dropping batches
  // prefetched with the old ones), and the ranks agree on `stop` before anyone stops.
  bool end_step(data::DataLoader& loader, bool stop);
  void print_summary() const;
  // The data-parallel job's gradient noise scale, measured when the daemon runs it as an elastic
  // job (EMBER_ELASTIC_RANKS set; dist/noise_scale.h); nullopt otherwise, on one rank, or before
  // the first estimate.
  std::optional<double> noise_scale() const;
  // Seconds this rank's synchronised steps waited for gradients after their backward, so far (0 on
  // one rank and in a pipeline): DataParallel::exposed_sync_seconds.
  double exposed_sync_seconds() const;
  // Each value summed over the ranks (an evaluation's sums over the ranks' shards).
  std::vector<double> sum(std::vector<double> values);

  // The job's checkpoint in `dir` (last.ckpt and a file per rank); only when active().
  void save(const std::string& dir, const TrainingState& state, const TrainingPosition& pos,
            const std::map<std::string, std::string>& meta);
  // Returns the position, the metadata and whether the checkpoint came from another world size.
  std::tuple<TrainingPosition, std::map<std::string, std::string>, bool> load(const std::string& dir,
                                                                              const TrainingState& state);

  // What main's catch prints ("mnist_cnn rank 1: ..." in a data-parallel job); returns status 1.
  int fail(const std::exception& e) const;

 private:
  // The MPI side (communicators, the data-parallel wrapper, the pipeline); defined in
  // parallel_job.cpp, and never made in a build without MPI.
  struct Dist;
  // Gradients travel through NCCL between GPU ranks (each on cuda:<local rank>) and through MPI
  // between CPU ranks; see parallel_job.cpp.
  Device gpu_device();
  void wrap_pipeline(nn::Module& model, int64_t global_batch, uint64_t seed, Shape example_shape, DType example_dtype);
  // Where the stages start (rank 0 profiles and plans, the others receive its boundaries).
  std::vector<int> plan_stages(nn::Sequential& seq, int64_t global_batch, const Shape& example_shape,
                               DType example_dtype);

  std::unique_ptr<Dist> dist_;
  std::string program_;
  ParallelFlags flags_;
};

}  // namespace ember::train
