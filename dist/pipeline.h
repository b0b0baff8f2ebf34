// Pipeline: a model cut into K stages, one per rank of a pipeline group, trained on micro-batches
// as torch.distributed.pipelining, GPipe and Megatron do it. Every rank builds the same
// nn::Sequential (same seed, or loaded from one checkpoint) and runs only its stage's layers
// [boundaries[s], boundaries[s + 1]). A step splits the global batch into M micro-batches; their
// activations travel forward to the next stage and their gradients back through the
// Communicator's point-to-point send/recv (MPI between CPU ranks, NCCL between GPUs), in the order
// of the schedule (pipeline_schedule.h). Each message is preceded by a small header (micro-batch,
// M, the batch size, shape, dtype, whether it needs a gradient) that the receiver checks, so ranks
// started with different settings or a layer producing an unexpected shape stop with an error that
// names both stages instead of hanging or misreading bytes.
//
// Gradients: micro-batch i's loss is weighted by its share n_i / N of the batch, so after a step
// each stage's parameters hold the gradient of the global batch's mean loss, as one process
// training on the whole batch would have (a loss that is a mean over the rows of its micro-batch;
// batch statistics such as batch norm's are per micro-batch, as in every pipeline). Buffers stay
// on their stage. The optimizer of each stage then steps its own parameters.
//
// A stage that throws rethrows with its stage named; its peers, waiting on it, stop within about
// a heartbeat (comm_mpi.h) with a message naming the rank they lost.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "dist/ddp.h"
#include "dist/pipeline_schedule.h"
#include "layers/container.h"
#include "layers/optim/grad_scaler.h"

namespace ember::dist {

struct PipelineOptions {
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  // Keep only each stage's input per micro-batch and run the stage's forward again in backward
  // (activation checkpointing): memory for compute. The random generator and the stage's buffers
  // are put back around the second forward, so dropout masks and batch-norm statistics are those
  // of the first.
  bool recompute = false;
  // The communicator rank of each stage, in stage order; empty: stage s is rank s of the whole
  // communicator. With several pipelines in one job (pipeline x data parallelism), each replica
  // passes its own ranks.
  std::vector<int> stage_ranks;
  // The replicas of this stage (pipeline_grid.h): their gradients are averaged over it during the
  // last micro-batch's backward, as DistributedDataParallel does (overlapped, in buckets). Must
  // outlive the pipeline. Buffers are not synchronised across replicas (batch-norm statistics stay
  // each replica's own).
  Communicator* data_parallel = nullptr;
  DdpOptions ddp;
  // Mixed precision (docs/PRECISION.md): each stage's forward runs under autocast(its input's
  // device, this dtype), and an output it leaves in 16 bits is widened to float32 before it is sent
  // on or reaches the loss, as the next float32 op of one process would widen it.
  std::optional<DType> autocast;
  // Loss scaling, required with autocast float16 (and only used then): every stage's own scaler,
  // all made with the same options. The last stage's backward starts from its micro-batches'
  // losses times the scale, so every stage's gradients arrive scaled; each stage's unscale_ then
  // all-reduces its inf/NaN flag (the maximum over the communicator, set_found_inf_reduction), so
  // that every stage skips the same steps and keeps the same scale. The training loop is one
  // process's: train_step, scaler.step(opt), scaler.update(), on every stage. Must outlive the
  // pipeline (which clears the reduction it installed when destroyed).
  optim::GradScaler* scaler = nullptr;
};

// What the last step did on this stage.
struct PipelineStepStats {
  int max_in_flight = 0;        // most micro-batches whose activations were held at once
  int64_t peak_bytes = 0;       // the CPU allocator's peak during the step, above its start
  double compute_seconds = 0;   // in this stage's forward and backward passes
  double wait_seconds = 0;      // blocked on a neighbour's activations or gradients
  std::vector<double> metrics;  // train_step's metrics, summed over the micro-batches
};

class Pipeline {
 public:
  using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;
  // Numbers the last stage computes from each micro-batch's output (a classifier's correct count),
  // summed over the step and sent with the loss to every stage (at most kMaxMetrics).
  using MetricFn = std::function<std::vector<double>(const Tensor& output, const Tensor& target)>;
  static constexpr int kMaxMetrics = 8;

  // `boundaries`: the first layer of each stage; boundaries[0] == 0, strictly increasing, all
  // below model.size(); their count is the stage count, which must equal stage_ranks' (or the
  // communicator's size). `model` and `comm` must outlive the pipeline.
  Pipeline(nn::Sequential& model, std::vector<int> boundaries, Communicator& comm, PipelineOptions opts = {});
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  int stage() const { return stage_; }
  int stages() const { return static_cast<int>(boundaries_.size()); }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ + 1 == stages(); }
  const PipelineOptions& options() const { return opts_; }
  // This rank's layers, under the names they have in the whole model ("3.weight"), so that the
  // stages' state dicts together are the whole model's.
  nn::Sequential& stage_module() { return *stage_module_; }
  // The whole model (every rank holds all of it; only this stage's layers are trained here).
  nn::Sequential& model() { return model_; }
  Communicator& comm() { return comm_; }
  // True on the replica whose stages speak for the job (the only one without data parallelism).
  bool first_replica() const { return !opts_.data_parallel || opts_.data_parallel->rank() == 0; }
  std::vector<Tensor> parameters() const { return stage_module_->parameters(); }
  // "stage 1 of 2 (rank 1, layers 4-7: Linear..ReLU)"
  std::string describe() const;

  // Forward and backward of one step over a global batch: `input` [N, ...] is read on the first
  // stage, `target` (N rows) on the last; other stages may pass undefined tensors. Returns the
  // batch's mean loss on every stage, and `metrics`' sums in last_step().metrics. Parameters'
  // gradients accumulate (zero them as usual).
  double train_step(const Tensor& input, const Tensor& target, const LossFn& loss, const MetricFn& metrics = {});
  // Forward without gradients: the model's output for `input` on the last stage (its micro-batches
  // concatenated along dim 0), undefined on the others.
  Tensor forward(const Tensor& input);

  const PipelineStepStats& last_step() const { return stats_; }

  // Copies every stage's parameters and buffers into the first stage's model() (on the first
  // replica), so that its rank can save or evaluate the whole model. A collective of the first
  // replica's stages; other replicas return at once.
  void gather_model();

 private:
  struct Micro;
  struct Header;
  Tensor run_stage(const Tensor& x);
  void install_found_inf_reduction();
  // A micro-batch's share of the loss, times the loss scale under float16.
  Tensor weighted_loss(const Tensor& loss, double weight) const;
  Tensor make_header(const Tensor& t, int to_stage, int micro, int64_t batch, bool needs_grad) const;
  Tensor wire_data(const Tensor& t) const;
  void send_tensor(const Tensor& t, int to_stage, int tag, int micro, int64_t batch, bool needs_grad);
  Header recv_header(int from_stage, int tag);
  Tensor recv_data(const Header& h, int from_stage, int tag);
  void check_header(const Header& h, int from_stage, const char* what, int micro, int micro_batches,
                    int64_t batch) const;
  void reap_sends();
  void flush_sends();
  // train_step's parts (pipeline.cpp): its setup, the schedule's two actions and the loss's sharing.
  struct Step;
  void begin_step(Step& s);
  Header next_input_header(Step& s);
  void receive_input(Step& s);
  int inputs_sent_before_gradient(const Step& s, int i) const;
  void forward_one(Step& s, int i);
  void take_loss(Step& s, Micro& mb, const Tensor& out);
  void backward_one(Step& s, int i);
  void recompute(Step& s, Micro& mb);
  void send_gradient(Step& s, int i, const Tensor& g);
  double share_loss(double loss_sum);

  nn::Sequential& model_;
  std::vector<int> boundaries_;
  Communicator& comm_;
  PipelineOptions opts_;
  int stage_ = 0;
  int step_micro_batches_ = 1;  // this step's (the batch may be smaller than options().micro_batches)
  std::shared_ptr<nn::Sequential> stage_module_;
  std::unique_ptr<DistributedDataParallel> ddp_;           // over options().data_parallel
  std::vector<std::pair<WorkPtr, Tensor>> pending_sends_;  // tensors kept alive until sent
  std::vector<WorkPtr> grad_sends_;                        // the last gradient sent back
  PipelineStepStats stats_;
};

// Micro-batch sizes: N split into M parts as evenly as possible, larger parts first.
std::vector<int64_t> micro_batch_sizes(int64_t batch, int micro_batches);

}  // namespace ember::dist
