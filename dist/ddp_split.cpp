#include "dist/ddp_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/ops.h"

namespace ember::dist {

BatchSplitter::BatchSplitter(Communicator& comm, int64_t global_batch, SplitOptions opts)
    : comm_(comm), global_(global_batch), opts_(opts) {
  EMBER_CHECK(global_batch >= comm.size(), "BatchSplitter: the global batch (", global_batch,
              ") must hold at least one example per rank (", comm.size(), " ranks)");
  EMBER_CHECK(opts.measure_steps >= 1 && opts.remeasure_every >= 0,
              "BatchSplitter: measure_steps must be >= 1 and remeasure_every >= 0");
  shares_ = shares_for(global_, std::vector<double>(static_cast<size_t>(comm.size()), 1.0));
}

std::vector<int64_t> BatchSplitter::shares_for(int64_t n, const std::vector<double>& weights) {
  auto k = static_cast<int64_t>(weights.size());
  EMBER_CHECK(k >= 1, "BatchSplitter: expected at least one weight");
  EMBER_CHECK(n >= k, "BatchSplitter: cannot give each of ", k, " ranks an example of a batch of ", n);
  double total = 0;
  for (double w : weights) {
    EMBER_CHECK(std::isfinite(w) && w > 0, "BatchSplitter: weights must be positive and finite, got ", w);
    total += w;
  }
  // Largest remainder, then every empty share takes one example from the largest.
  std::vector<int64_t> out(weights.size(), 0);
  std::vector<std::pair<double, size_t>> rem;
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    double exact = static_cast<double>(n) * weights[i] / total;
    auto whole = static_cast<int64_t>(std::floor(exact));
    out[i] = whole;
    given += whole;
    rem.emplace_back(exact - static_cast<double>(whole), i);
  }
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t j = 0; given < n; ++j, ++given) ++out[rem[j % rem.size()].second];
  for (auto& v : out)
    if (v == 0) {
      --*std::max_element(out.begin(), out.end());
      v = 1;
    }
  return out;
}

void BatchSplitter::set_weights(const std::vector<double>& weights) {
  EMBER_CHECK(static_cast<int>(weights.size()) == comm_.size(), "BatchSplitter: expected one weight per rank (",
              comm_.size(), "), got ", weights.size());
  shares_ = shares_for(global_, weights);
}

int64_t BatchSplitter::local_offset() const {
  return std::accumulate(shares_.begin(), shares_.begin() + comm_.rank(), int64_t{0});
}

std::vector<double> BatchSplitter::shard_weights() const {
  return {shares_.begin(), shares_.end()};
}

double BatchSplitter::loss_weight() const {
  return static_cast<double>(comm_.size()) * static_cast<double>(local_share()) / static_cast<double>(global_);
}

bool BatchSplitter::measuring() const {
  if (!opts_.speed_weighted) return false;
  // Step 0 warms caches up; steps 1..measure_steps are timed, and again every remeasure_every.
  int64_t s = step_;
  if (s >= 1 && s <= opts_.measure_steps) return true;
  if (opts_.remeasure_every > 0 && s > opts_.measure_steps) {
    int64_t phase = (s - 1) % opts_.remeasure_every;
    return s > opts_.remeasure_every && phase < opts_.measure_steps;
  }
  return false;
}

void BatchSplitter::begin_compute() {
  began_ = Clock::now();
}

void BatchSplitter::end_compute() {
  end_compute(Clock::now());
}

void BatchSplitter::end_compute(Clock::time_point at) {
  if (!measuring() || began_ == Clock::time_point{} || at < began_) return;
  measured_seconds_ += std::chrono::duration<double>(at - began_).count();
  measured_examples_ += local_share();
  ++measured_steps_;
}

bool BatchSplitter::end_step() {
  bool was_measuring = measuring();
  ++step_;
  if (!was_measuring || measuring() || measured_steps_ == 0) return false;
  // The last timed step of a measurement: every rank shares its seconds per example.
  // On the communicator's device (NCCL moves only GPU tensors), read back on the host.
  const Device dev = comm_.device();
  Tensor mine = full({1}, measured_seconds_ / static_cast<double>(std::max<int64_t>(measured_examples_, 1)),
                     {.dtype = DType::Float64, .device = dev});
  Tensor all = empty({comm_.size()}, {.dtype = DType::Float64, .device = dev});
  comm_.all_gather(all, mine, "batch split timing")->wait();
  std::vector<double> per_example = all.to(Device::cpu()).to_vector<double>();
  measured_seconds_ = 0;
  measured_examples_ = 0;
  measured_steps_ = 0;
  std::vector<double> speed;
  for (double s : per_example) speed.push_back(1.0 / std::max(s, 1e-12));
  std::vector<int64_t> before = shares_;
  shares_ = shares_for(global_, speed);
  return shares_ != before;
}

}  // namespace ember::dist
