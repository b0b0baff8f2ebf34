#include "dist/pipeline.h"

#include <algorithm>
#include <chrono>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/ops/autocast.h"

namespace ember::dist {
namespace {

// Tags of the two directions and of the step's loss; a message's data follows its header on tag+1.
constexpr int kForwardTag = 1100, kBackwardTag = 1110, kLossTag = 1120, kGatherTag = 1130;
constexpr int kMaxDims = 8;
constexpr int64_t kMagic = 0x454d4250;  // "EMBP": bytes from something that is not a pipeline peer
// magic, micro-batch, micro-batch count, batch rows, schedule, dtype, needs grad, ndim, dims...
constexpr int kHeaderLen = 8 + kMaxDims;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

struct Pipeline::Header {
  int64_t micro = 0, micro_batches = 0, batch = 0, schedule = 0, dtype = 0, needs_grad = 0;
  std::vector<int64_t> shape;
};

struct Pipeline::Micro {
  Tensor input;   // the stage's input (a leaf that collects its gradient, after the first stage)
  Tensor output;  // the output with its history (the weighted loss on the last stage); undefined
                  // when recomputing
  Tensor target;
  double weight = 0;     // n_i / N
  GeneratorState rng{};  // before this micro-batch's forward, for the recomputation
  bool output_needs_grad = false;
  std::vector<int64_t> output_shape;
};

std::vector<int64_t> micro_batch_sizes(int64_t batch, int micro_batches) {
  EMBER_CHECK(micro_batches >= 1, "pipeline: expected at least one micro-batch, got ", micro_batches);
  EMBER_CHECK(batch >= micro_batches, "pipeline: a batch of ", batch, " rows cannot be split into ", micro_batches,
              " micro-batches");
  std::vector<int64_t> sizes(static_cast<size_t>(micro_batches), batch / micro_batches);
  for (int64_t i = 0; i < batch % micro_batches; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

Pipeline::Pipeline(nn::Sequential& model, std::vector<int> boundaries, Communicator& comm, PipelineOptions opts)
    : model_(model), boundaries_(std::move(boundaries)), comm_(comm), opts_(std::move(opts)) {
  const int k = static_cast<int>(boundaries_.size());
  const int layers = static_cast<int>(model_.size());
  EMBER_CHECK(k >= 1, "pipeline: expected at least one stage boundary");
  EMBER_CHECK(boundaries_[0] == 0, "pipeline: the first stage must start at layer 0, got ", boundaries_[0]);
  for (int s = 1; s < k; ++s)
    EMBER_CHECK(boundaries_[s] > boundaries_[s - 1] && boundaries_[s] < layers, "pipeline: stage ", s,
                " starts at layer ", boundaries_[s], ": expected boundaries strictly increasing and below the model's ",
                layers, " layers");
  EMBER_CHECK(layers >= k, "pipeline: ", k, " stages need at least ", k, " layers, the model has ", layers);
  EMBER_CHECK(opts_.micro_batches >= 1, "pipeline: expected at least one micro-batch, got ", opts_.micro_batches);
  EMBER_CHECK(!opts_.autocast || *opts_.autocast == DType::BFloat16 || *opts_.autocast == DType::Float16,
              "pipeline: autocast to ", dtype_name(*opts_.autocast),
              " is not supported (expected bfloat16 or float16)");
  const bool fp16 = opts_.autocast == DType::Float16;
  EMBER_CHECK(!fp16 || (opts_.scaler && opts_.scaler->is_enabled()),
              "pipeline: autocast to float16 needs a loss scaler (PipelineOptions::scaler, enabled): float16 "
              "gradients underflow without one");
  if (!fp16) opts_.scaler = nullptr;
  if (opts_.stage_ranks.empty())
    for (int s = 0; s < k; ++s) opts_.stage_ranks.push_back(s);
  EMBER_CHECK(static_cast<int>(opts_.stage_ranks.size()) == k, "pipeline: ", k, " stages but ",
              opts_.stage_ranks.size(), " stage ranks");
  stage_ = -1;
  for (int s = 0; s < k; ++s) {
    const int r = opts_.stage_ranks[s];
    EMBER_CHECK(r >= 0 && r < comm_.size(), "pipeline: stage ", s, "'s rank ", r, " is not in [0, ", comm_.size(), ")");
    for (int t = 0; t < s; ++t)
      EMBER_CHECK(opts_.stage_ranks[t] != r, "pipeline: rank ", r, " is given two stages (", t, " and ", s, ")");
    if (r == comm_.rank()) stage_ = s;
  }
  EMBER_CHECK(stage_ >= 0, "pipeline: rank ", comm_.rank(), " holds none of the ", k, " stages");
  const int first = boundaries_[stage_], end = stage_ + 1 < k ? boundaries_[stage_ + 1] : layers;
  const auto children = model_.named_children();
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> mine;
  for (int i = first; i < end; ++i) mine.emplace_back(children[i].first, model_.items()[i]);
  stage_module_ = std::make_shared<nn::Sequential>(std::move(mine));
  if (opts_.data_parallel && opts_.data_parallel->size() > 1) {
    bool trainable = false;
    for (const Tensor& p : stage_module_->parameters()) trainable |= p.requires_grad();
    // A stage without parameters (a pooling layer alone) has nothing to average.
    if (trainable) {
      DdpOptions d = opts_.ddp;
      d.buffer_sync = BufferSync::None;
      ddp_ = std::make_unique<DistributedDataParallel>(*stage_module_, *opts_.data_parallel, d);
    }
  }
  if (opts_.scaler) install_found_inf_reduction();
}

Pipeline::~Pipeline() {
  if (opts_.scaler) opts_.scaler->set_found_inf_reduction({});
}

// Every stage skips together: the maximum of the stages' inf/NaN flags, over the communicator
// (each rank of it, every replica's stages too, unscales once a step).
void Pipeline::install_found_inf_reduction() {
  opts_.scaler->set_found_inf_reduction([this](Tensor& found_inf) {
    Tensor t = found_inf.to(comm_.device()).contiguous();
    comm_.all_reduce(t, ReduceOp::Max, "loss scaling: inf/NaN flag")->wait();
    if (!t.is_same(found_inf)) found_inf.copy_(t);
  });
}

Tensor Pipeline::weighted_loss(const Tensor& loss, double weight) const {
  Tensor w = mul(loss, weight);
  return opts_.scaler ? opts_.scaler->scale(w) : w;
}

std::string Pipeline::describe() const {
  const int layers = static_cast<int>(model_.size());
  const int first = boundaries_[stage_], last = (stage_ + 1 < stages() ? boundaries_[stage_ + 1] : layers) - 1;
  return detail::concat("stage ", stage_, " of ", stages(), " (rank ", comm_.rank(), ", layers ", first, "-", last,
                        ": ", model_[first].type_name(), first == last ? "" : "..",
                        first == last ? "" : model_[last].type_name(), ")");
}

Tensor Pipeline::run_stage(const Tensor& x) {
  try {
    if (!opts_.autocast) return stage_module_->forward(x);
    Tensor out;
    {
      autocast scope(x.device(), *opts_.autocast);
      out = stage_module_->forward(x);
    }
    return out.dtype() == *opts_.autocast ? out.to(DType::Float32) : out;
  } catch (const Error& e) {
    throw Error("pipeline " + describe() + ": " + e.what());
  }
}

// The message that goes before a tensor: what it is and its shape, on the communicator's device.
Tensor Pipeline::make_header(const Tensor& t, int to_stage, int micro, int64_t batch, bool needs_grad) const {
  EMBER_CHECK(t.dim() <= kMaxDims, "pipeline ", describe(), ": cannot send a tensor of ", t.dim(),
              " dimensions to stage ", to_stage, " (at most ", kMaxDims, ")");
  Tensor h = empty({kHeaderLen}, {.dtype = DType::Int64});
  int64_t* p = h.data_ptr<int64_t>();
  std::fill(p, p + kHeaderLen, 0);
  p[0] = kMagic;
  p[1] = micro;
  p[2] = step_micro_batches_;
  p[3] = batch;
  p[4] = static_cast<int64_t>(opts_.schedule);
  p[5] = static_cast<int64_t>(t.dtype());
  p[6] = needs_grad;
  p[7] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) p[8 + d] = t.size(d);
  return comm_.device() != h.device() ? h.to(comm_.device()) : h;
}

Tensor Pipeline::wire_data(const Tensor& t) const {
  Tensor data = t.detach().contiguous();
  return data.device() != comm_.device() ? data.to(comm_.device()) : data;
}

void Pipeline::send_tensor(const Tensor& t, int to_stage, int tag, int micro, int64_t batch, bool needs_grad) {
  const int peer = opts_.stage_ranks[to_stage];
  Tensor h = make_header(t, to_stage, micro, batch, needs_grad);
  pending_sends_.emplace_back(comm_.send(h, peer, tag), h);
  if (t.numel() == 0) return;
  Tensor data = wire_data(t);
  pending_sends_.emplace_back(comm_.send(data, peer, tag + 1), data);
}

Pipeline::Header Pipeline::recv_header(int from_stage, int tag) {
  const auto t0 = Clock::now();
  Tensor h = empty({kHeaderLen}, {.dtype = DType::Int64, .device = comm_.device()});
  comm_.recv(h, opts_.stage_ranks[from_stage], tag)->wait();
  stats_.wait_seconds += seconds_since(t0);
  if (h.device() != Device::cpu()) h = h.to(Device::cpu());
  const int64_t* p = h.data_ptr<int64_t>();
  const std::string who = detail::concat("pipeline ", describe(), ": from stage ", from_stage, " (rank ",
                                         opts_.stage_ranks[from_stage], "): ");
  EMBER_CHECK(p[0] == kMagic, who, "expected a pipeline header, received other bytes");
  EMBER_CHECK(p[5] >= 0 && p[5] < kNumDTypes && p[7] >= 0 && p[7] <= kMaxDims, who, "a malformed header (dtype ", p[5],
              ", ", p[7], " dimensions)");
  Header out{p[1], p[2], p[3], p[4], p[5], p[6], {}};
  for (int64_t d = 0; d < p[7]; ++d) {
    EMBER_CHECK(p[8 + d] >= 0, who, "a negative size in dimension ", d);
    out.shape.push_back(p[8 + d]);
  }
  EMBER_CHECK(out.schedule == static_cast<int64_t>(opts_.schedule), who, "it runs the ",
              pipeline_schedule_name(static_cast<PipelineSchedule>(out.schedule == 0 ? 0 : 1)),
              " schedule, this stage ", pipeline_schedule_name(opts_.schedule),
              ": every stage must be given the same --schedule");
  return out;
}

Tensor Pipeline::recv_data(const Header& h, int from_stage, int tag) {
  Tensor t = empty(Shape(h.shape), {.dtype = static_cast<DType>(h.dtype), .device = comm_.device()});
  if (t.numel() == 0) return t;
  const auto t0 = Clock::now();
  try {
    comm_.recv(t, opts_.stage_ranks[from_stage], tag + 1)->wait();
  } catch (const Error& e) {
    throw Error("pipeline " + describe() + ": " + e.what());
  }
  stats_.wait_seconds += seconds_since(t0);
  return t;
}

// Drops the sends that have completed, so that a sent activation is freed as soon as the next stage
// has it rather than at the end of the step (1F1B's memory bound depends on it).
void Pipeline::reap_sends() {
  std::erase_if(pending_sends_, [](auto& s) {
    if (!s.first->completed()) return false;
    s.first->wait();  // rethrows a failed send
    return true;
  });
}

void Pipeline::flush_sends() {
  for (auto& [w, t] : pending_sends_) w->wait();
  pending_sends_.clear();
  grad_sends_.clear();
}

void Pipeline::check_header(const Header& h, int from_stage, const char* what, int micro, int micro_batches,
                            int64_t batch) const {
  const std::string who =
      detail::concat("pipeline ", describe(), ": stage ", from_stage, " (rank ", opts_.stage_ranks[from_stage], ") ");
  EMBER_CHECK(h.micro_batches == micro_batches, who, "splits the batch into ", h.micro_batches,
              " micro-batches, this stage into ", micro_batches,
              ": every stage must be given the same --micro-batches");
  EMBER_CHECK(h.batch == batch, who, "has a batch of ", h.batch, " rows, this stage ", batch);
  EMBER_CHECK(h.micro == micro, who, "sent micro-batch ", h.micro, "'s ", what, " where micro-batch ", micro,
              "'s was expected");
}

// One train_step's state, shared by the actions of the schedule.
struct Pipeline::Step {
  const Tensor& input;
  const Tensor& target;
  const LossFn& loss;
  const MetricFn& metrics;
  int64_t batch = 0;
  int m = 0;  // micro-batches
  std::vector<int64_t> sizes, offsets;
  std::vector<Micro> micro;
  Header first_in;  // the first activation's header (read early: it says the batch size)
  bool have_first_header = false;
  // Each link carries its messages in the order of the upstream stage's actions, which is the only
  // order NCCL can deliver them in: its transfers on one stream run one after another and each
  // waits for its peer's matching one (MPI would buffer a gradient sent ahead; NCCL does not). So
  // before a stage sends micro-batch i's gradient back, it takes every activation that the
  // previous stage sends before taking that gradient; under 1F1B that is the input of its own
  // next forward, received one action early, as Megatron's send_backward_recv_forward does.
  std::vector<Tensor> received;
  std::vector<WorkPtr> arrival;  // the exchange bringing received[i], until its forward waits for it
  std::vector<PipelineAction> upstream;
  int next_input = 0;  // the next micro-batch whose activation this stage has not received
  double loss_sum = 0;
  int live = 0;
  bool params_need_grad = false;
};

double Pipeline::train_step(const Tensor& input, const Tensor& target, const LossFn& loss, const MetricFn& metrics) {
  EMBER_CHECK(loss || !is_last(), "pipeline ", describe(), ": train_step needs a loss function on the last stage");
  stats_ = {};
  Allocator* alloc = get_allocator(comm_.device());
  const int64_t bytes_at_start = alloc->stats().in_use;
  alloc->reset_peak();
  Step s{input, target, loss, metrics};
  begin_step(s);
  for (const PipelineAction& a : pipeline_actions(opts_.schedule, stages(), stage_, s.m)) {
    reap_sends();
    if (a.kind == PipelineAction::Forward)
      forward_one(s, a.micro_batch);
    else
      backward_one(s, a.micro_batch);
  }
  flush_sends();
  stats_.peak_bytes = alloc->stats().peak - bytes_at_start;
  return share_loss(s.loss_sum);
}

// The batch size and micro-batch count come from the first stage (its input), in every header.
void Pipeline::begin_step(Step& s) {
  if (is_first()) {
    EMBER_CHECK(s.input.defined() && s.input.dim() >= 1, "pipeline ", describe(),
                ": train_step needs the batch's input (a tensor with a batch dimension) on the first stage");
    s.batch = s.input.size(0);
    s.m = static_cast<int>(std::min<int64_t>(opts_.micro_batches, s.batch));
  } else {
    s.first_in = recv_header(stage_ - 1, kForwardTag);
    s.batch = s.first_in.batch;
    s.m = static_cast<int>(std::min<int64_t>(opts_.micro_batches, s.batch));
    check_header(s.first_in, stage_ - 1, "activation", 0, s.m, s.batch);
  }
  EMBER_CHECK(s.batch >= 1, "pipeline ", describe(), ": the batch is empty");
  step_micro_batches_ = s.m;
  s.sizes = micro_batch_sizes(s.batch, s.m);
  s.offsets.assign(s.sizes.size(), 0);
  for (size_t i = 1; i < s.sizes.size(); ++i) s.offsets[i] = s.offsets[i - 1] + s.sizes[i - 1];
  if (is_last())
    EMBER_CHECK(s.target.defined() && s.target.dim() >= 1 && s.target.size(0) == s.batch, "pipeline ", describe(),
                ": expected a target with the batch's ", s.batch, " rows on the last stage, got ",
                s.target.defined() ? shape_str(s.target.shape()) : std::string("none"));

  s.micro.resize(static_cast<size_t>(s.m));
  s.have_first_header = !is_first();
  s.received.resize(static_cast<size_t>(s.m));
  s.arrival.resize(static_cast<size_t>(s.m));
  if (!is_first()) s.upstream = pipeline_actions(opts_.schedule, stages(), stage_ - 1, s.m);
  for (const Tensor& p : stage_module_->parameters()) s.params_need_grad |= p.requires_grad();
}

// The next activation's header, checked; its data is received by the caller.
Pipeline::Header Pipeline::next_input_header(Step& s) {
  Header h = s.have_first_header ? s.first_in : recv_header(stage_ - 1, kForwardTag);
  s.have_first_header = false;
  check_header(h, stage_ - 1, "activation", s.next_input, s.m, s.batch);
  return h;
}

void Pipeline::receive_input(Step& s) {
  const int i = s.next_input;
  Header h = next_input_header(s);
  Tensor x = recv_data(h, stage_ - 1, kForwardTag);
  if (h.needs_grad) x.requires_grad_();
  s.received[static_cast<size_t>(i)] = x;
  ++s.next_input;
}

// How many activations the previous stage sends before it takes gradient i that this stage has
// not received yet.
int Pipeline::inputs_sent_before_gradient(const Step& s, int i) const {
  int n = 0;
  for (const PipelineAction& a : s.upstream) {
    if (a.kind == PipelineAction::Backward && a.micro_batch == i) break;
    if (a.kind == PipelineAction::Forward && a.micro_batch >= s.next_input) ++n;
  }
  return n;
}

void Pipeline::forward_one(Step& s, int i) {
  Micro& mb = s.micro[static_cast<size_t>(i)];
  mb.weight = static_cast<double>(s.sizes[i]) / static_cast<double>(s.batch);
  Tensor x;
  if (is_first()) {
    x = s.input.narrow(0, s.offsets[i], s.sizes[i]);
  } else {
    while (s.next_input <= i) receive_input(s);
    x = std::move(s.received[static_cast<size_t>(i)]);
    if (WorkPtr w = std::move(s.arrival[static_cast<size_t>(i)])) {  // it came in a gradient's exchange
      const auto t0 = Clock::now();
      try {
        w->wait();
      } catch (const Error& e) {
        throw Error("pipeline " + describe() + ": " + e.what());
      }
      stats_.wait_seconds += seconds_since(t0);
    }
  }
  mb.input = x;
  if (is_last()) mb.target = s.target.narrow(0, s.offsets[i], s.sizes[i]);
  const auto t0 = Clock::now();
  Tensor out;
  if (opts_.recompute) {
    mb.rng = default_generator().state();
    NoGradGuard no_grad;
    out = run_stage(x);
    mb.output_needs_grad = s.params_need_grad || x.requires_grad();
  } else {
    out = run_stage(x);
    mb.output_needs_grad = out.requires_grad();
  }
  if (is_last()) {
    take_loss(s, mb, out);
  } else {
    if (!opts_.recompute) mb.output = out;
    mb.output_shape = out.shape();
    stats_.compute_seconds += seconds_since(t0);
    send_tensor(out, stage_ + 1, kForwardTag, i, s.batch, mb.output_needs_grad);
  }
  if (is_last()) stats_.compute_seconds += seconds_since(t0);
  stats_.max_in_flight = std::max(stats_.max_in_flight, ++s.live);
}

// The last stage: the micro-batch's loss (weighted into the step's) and metrics.
void Pipeline::take_loss(Step& s, Micro& mb, const Tensor& out) {
  Tensor l = s.loss(out, mb.target);
  s.loss_sum += l.item() * mb.weight;
  if (s.metrics) {
    NoGradGuard no_grad;
    const std::vector<double> v = s.metrics(out, mb.target);
    EMBER_CHECK(static_cast<int>(v.size()) <= kMaxMetrics, "pipeline ", describe(), ": at most ", kMaxMetrics,
                " metrics, got ", v.size());
    if (stats_.metrics.size() < v.size()) stats_.metrics.resize(v.size(), 0.0);
    for (size_t j = 0; j < v.size(); ++j) stats_.metrics[j] += v[j];
  }
  if (!opts_.recompute) mb.output = weighted_loss(l, mb.weight);
}

void Pipeline::backward_one(Step& s, int i) {
  Micro& mb = s.micro[static_cast<size_t>(i)];
  Tensor grad_out;
  if (!is_last() && mb.output_needs_grad) {
    Header h = recv_header(stage_ + 1, kBackwardTag);
    check_header(h, stage_ + 1, "gradient", i, s.m, s.batch);
    EMBER_CHECK(h.shape == mb.output_shape, "pipeline ", describe(), ": stage ", stage_ + 1,
                " sent a gradient of shape ", shape_str(h.shape), " for micro-batch ", i,
                ", but this stage's output was ", shape_str(mb.output_shape));
    grad_out = recv_data(h, stage_ + 1, kBackwardTag);
  }
  const auto t0 = Clock::now();
  if (opts_.recompute && mb.output_needs_grad) recompute(s, mb);
  // The replicas average the step's accumulated gradients during the last backward.
  const bool sync = ddp_ && i == s.m - 1 && mb.output.defined() && mb.output.requires_grad();
  try {
    if (sync) ddp_->prepare_for_backward({mb.output});
    if (mb.output.defined() && mb.output.requires_grad()) mb.output.backward(grad_out);
    if (sync) ddp_->synchronize();
  } catch (const Error& e) {
    throw Error("pipeline " + describe() + ": backward of micro-batch " + std::to_string(i) + ": " + e.what());
  }
  stats_.compute_seconds += seconds_since(t0);
  Tensor g;
  if (!is_first() && mb.input.requires_grad()) {
    g = mb.input.grad();
    if (!g.defined()) g = zeros_like(mb.input);  // the stage did not use its input
  }
  mb = Micro{};  // freed before the next input arrives
  --s.live;
  if (g.defined()) send_gradient(s, i, g);
}

// The forward again, with history, for a micro-batch whose first forward kept none.
void Pipeline::recompute(Step& s, Micro& mb) {
  // The second forward must see the first one's random numbers and must not update the
  // buffers (batch-norm statistics) a second time.
  const GeneratorState now = default_generator().state();
  std::vector<Tensor> saved;
  for (const Tensor& b : stage_module_->buffers()) saved.push_back(b.clone());
  default_generator().set_state(mb.rng);
  Tensor out = run_stage(mb.input);
  default_generator().set_state(now);
  {
    NoGradGuard no_grad;
    auto bufs = stage_module_->buffers();
    for (size_t j = 0; j < bufs.size(); ++j) bufs[j].copy_(saved[j]);
  }
  mb.output = is_last() ? weighted_loss(s.loss(out, mb.target), mb.weight) : out;
}

// Micro-batch i's input gradient, back to the previous stage, in one exchange with the last
// activation that stage sends before taking it (1F1B's crossing: Megatron's
// send_backward_recv_forward). Each link's messages keep the upstream stage's order: the
// activations before the last come in full first, then the last one's header (its shape), and the
// gradient's header and data go out while that activation's data comes in. On NCCL the exchange
// is one group, so the two directions move together; the activation is waited for by the forward
// that takes it.
void Pipeline::send_gradient(Step& s, int i, const Tensor& g) {
  for (int n = inputs_sent_before_gradient(s, i); n > 1; --n) receive_input(s);
  std::vector<P2POp> ops;
  const int up = opts_.stage_ranks[stage_ - 1];
  Tensor h = make_header(g, stage_ - 1, i, s.batch, false);
  ops.push_back({P2POp::Send, h, up, kBackwardTag});
  Tensor data;
  if (g.numel() > 0) {
    data = wire_data(g);
    ops.push_back({P2POp::Send, data, up, kBackwardTag + 1});
  }
  int incoming = -1;
  if (inputs_sent_before_gradient(s, i) == 1) {
    incoming = s.next_input;
    Header in = next_input_header(s);
    Tensor x = empty(Shape(in.shape), {.dtype = static_cast<DType>(in.dtype), .device = comm_.device()});
    if (in.needs_grad) x.requires_grad_();
    if (x.numel() > 0) ops.push_back({P2POp::Recv, x.detach(), up, kForwardTag + 1});
    s.received[static_cast<size_t>(incoming)] = x;
    ++s.next_input;
  }
  // At most one sent gradient waits for its receiver, so that a slow previous stage cannot
  // pile gradients up here beyond the schedule's bound. Waiting cannot deadlock: the previous
  // stage takes gradient i in its backward i, which needs nothing more from this stage.
  for (auto& w : grad_sends_) w->wait();
  grad_sends_.clear();
  WorkPtr w = comm_.exchange(std::move(ops), detail::concat("micro-batch ", i, " gradient"));
  pending_sends_.emplace_back(w, data.defined() ? data : h);
  grad_sends_.push_back(w);
  if (incoming >= 0) s.arrival[static_cast<size_t>(incoming)] = w;
}

// Every stage returns the loss and the metrics, which only the last one computed: [loss, the
// number of metrics, the metrics].
double Pipeline::share_loss(double loss_sum) {
  const int k = stages();
  Tensor l = zeros({2 + kMaxMetrics}, {.dtype = DType::Float64});
  if (is_last()) {
    double* p = l.data_ptr<double>();
    p[0] = loss_sum;
    p[1] = static_cast<double>(stats_.metrics.size());
    for (size_t j = 0; j < stats_.metrics.size(); ++j) p[2 + j] = stats_.metrics[j];
  }
  if (comm_.device() != l.device()) l = l.to(comm_.device());
  if (is_last()) {
    std::vector<WorkPtr> sent;
    for (int s = 0; s + 1 < k; ++s) sent.push_back(comm_.send(l, opts_.stage_ranks[s], kLossTag));
    for (auto& w : sent) w->wait();
  } else {
    comm_.recv(l, opts_.stage_ranks[k - 1], kLossTag)->wait();
    const std::vector<double> v = l.to(Device::cpu()).to_vector<double>();
    stats_.metrics.assign(v.begin() + 2, v.begin() + 2 + static_cast<int64_t>(v[1]));
  }
  return l.to(Device::cpu()).to_vector<double>()[0];
}

Tensor Pipeline::forward(const Tensor& input) {
  NoGradGuard no_grad;
  int64_t batch = 0;
  int m = 0;
  Header first_in;
  if (is_first()) {
    EMBER_CHECK(input.defined() && input.dim() >= 1, "pipeline ", describe(),
                ": forward needs the batch's input (a tensor with a batch dimension) on the first stage");
    batch = input.size(0);
  } else {
    first_in = recv_header(stage_ - 1, kForwardTag);
    batch = first_in.batch;
  }
  m = static_cast<int>(std::min<int64_t>(opts_.micro_batches, std::max<int64_t>(batch, 1)));
  if (batch == 0) m = 1;
  step_micro_batches_ = m;
  const std::vector<int64_t> sizes = batch == 0 ? std::vector<int64_t>{0} : micro_batch_sizes(batch, m);
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (int i = 0; i < m; ++i) {
    Tensor x;
    if (is_first()) {
      x = input.narrow(0, offset, sizes[i]);
      offset += sizes[i];
    } else {
      Header h = i == 0 ? first_in : recv_header(stage_ - 1, kForwardTag);
      check_header(h, stage_ - 1, "activation", i, m, batch);
      x = recv_data(h, stage_ - 1, kForwardTag);
    }
    Tensor out = run_stage(x);
    if (is_last())
      outs.push_back(out);
    else
      send_tensor(out, stage_ + 1, kForwardTag, i, batch, false);
  }
  flush_sends();
  return is_last() ? (outs.size() == 1 ? outs[0] : cat(outs, 0)) : Tensor();
}

void Pipeline::gather_model() {
  if (!first_replica() || stages() == 1) return;
  NoGradGuard no_grad;
  if (!is_first()) {
    std::vector<WorkPtr> sent;
    std::vector<Tensor> keep;
    for (auto& [name, t] : stage_module_->state_dict()) {
      keep.push_back(t.contiguous());
      if (keep.back().device() != comm_.device()) keep.back() = keep.back().to(comm_.device());
      if (keep.back().numel() > 0) sent.push_back(comm_.send(keep.back(), opts_.stage_ranks[0], kGatherTag));
    }
    for (auto& w : sent) w->wait();
    return;
  }
  // The layers of stage s, in the order that stage's state_dict lists them.
  const int layers = static_cast<int>(model_.size());
  for (int s = 1; s < stages(); ++s) {
    const int end = s + 1 < stages() ? boundaries_[s + 1] : layers;
    for (int i = boundaries_[s]; i < end; ++i)
      for (auto& [name, t] : model_[i].state_dict()) {
        if (t.numel() == 0) continue;
        Tensor buf = empty(t.shape(), {.dtype = t.dtype(), .device = comm_.device()});
        comm_.recv(buf, opts_.stage_ranks[s], kGatherTag)->wait();
        Tensor(t).copy_(buf);
      }
  }
}

}  // namespace ember::dist
