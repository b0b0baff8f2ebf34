#include "dist/data_parallel.h"

#include <algorithm>
#include <chrono>

#include "core/ops.h"

namespace ember::dist {
namespace {

DdpOptions with_norms(DdpOptions o, bool measure) {
  o.measure_grad_norms = o.measure_grad_norms || measure;
  return o;
}

}  // namespace

DataParallel::DataParallel(nn::Module& module, Communicator& comm, int64_t global_batch, DataParallelOptions opts,
                           Communicator* grad_comm)
    : comm_(comm),
      grad_comm_(grad_comm ? *grad_comm : comm),
      overlap_(opts.ddp.overlap),
      ddp_(module, grad_comm_, with_norms(opts.ddp, opts.measure_noise)),
      split_(comm, global_batch, opts.split) {
  if (!opts.weights.empty()) split_.set_weights(opts.weights);
}

Tensor DataParallel::forward(const Tensor& x) {
  // Under no_sync (gradient accumulation) the step's micro-batches are timed as one: from the
  // first's forward to the last gradient of the synchronised backward that ends them.
  if (!accumulating_) split_.begin_compute();
  accumulating_ = !ddp_.sync_enabled();
  ddp_.set_loss_weight(split_.loss_weight());  // weight() scales this step's loss by it
  return ddp_.forward(x);
}

Tensor DataParallel::weight(Tensor loss) const {
  return loss.mul_(split_.loss_weight());
}

bool DataParallel::end_step() {
  const DdpTimeline& t = ddp_.last_timeline();
  split_.end_compute(t.last_grad);
  // The reducer's timeline and norms are those of its latest synchronised step: counted once (a
  // step inside no_sync() leaves them as they were).
  if (ddp_.steps_synchronized() != counted_step_) {
    counted_step_ = ddp_.steps_synchronized();
    exposed_sync_s_ += std::max(0.0, std::chrono::duration<double>(t.synchronized - t.last_grad).count());
    const GradNorms& n = ddp_.last_grad_norms();
    if (n.valid && size() > 1) {
      // E|g_r|^2 = |G|^2 + tr(Sigma) / b_r for each rank's share b_r (>= 1: the splitter's), so the
      // ranks' mean of |g_r|^2 is that of one batch the harmonic mean of the shares.
      double inverse = 0;
      for (int64_t b : split_.shares()) inverse += 1.0 / static_cast<double>(b);
      const double big = static_cast<double>(split_.global_batch());
      noise_.add(noise_sample(n.local_sqr, size() / inverse, n.global_sqr, big));
    }
  }
  return split_.end_step();
}

bool DataParallel::any(bool flag) {
  Tensor t = full({1}, flag ? 1.0 : 0.0);
  comm_.all_reduce(t, ReduceOp::Max, "stop flag")->wait();
  return t.item() > 0;
}

std::vector<double> DataParallel::sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  Tensor t = empty({static_cast<int64_t>(values.size())}, {.dtype = DType::Float64});
  std::copy(values.begin(), values.end(), t.data_ptr<double>());
  comm_.all_reduce(t, ReduceOp::Sum, "sums")->wait();
  return t.to_vector<double>();
}

std::string DataParallel::summary() const {
  std::string shares;
  for (int64_t v : split_.shares()) {
    if (!shares.empty()) shares += '/';
    shares += std::to_string(v);
  }
  return "Data-parallel over " + std::to_string(comm_.size()) + " ranks: shares of each batch " + shares + ", " +
         std::to_string(ddp_.bucket_layout().size()) + " gradient buckets (" + grad_comm_.backend() + ")" +
         (overlap_ ? "" : ", overlap off");
}

}  // namespace ember::dist
