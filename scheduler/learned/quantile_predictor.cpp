#include "scheduler/learned/quantile_predictor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/shape.h"
#include "scheduler/params.h"
#include "scheduler/stats.h"

namespace ember::sched::learned {
namespace {

// log(seconds) / 10: a week is log(604800) / 10 = 1.3, a minute 0.41.
float squash(double seconds) {
  return static_cast<float>(std::log(std::max(seconds, 1.0)) / 10);
}

std::string job_key(const SubmitFeatures& f) {
  uint64_t bits = 0;
  std::memcpy(&bits, &f.submit, sizeof bits);
  std::string key = f.queue;
  key.append(1, '|').append(std::to_string(f.gpus)).append(1, '|').append(std::to_string(bits));
  return key;
}

Tensor rows_tensor(const std::vector<float>& v) {
  return from_vector(v, {static_cast<int64_t>(v.size() / kQuantileInputs), kQuantileInputs});
}

}  // namespace

std::array<float, kQuantileInputs> quantile_inputs(HistoryPredictor& history, const SubmitFeatures& f, double at) {
  std::array<float, kQuantileInputs> x{};
  x[0] = squash(history.predict({f.queue, f.gpus, at}));
  const double window = history.options().window;
  int k = 1;
  for (const HistoryPredictor::Group* g : history.groups(f)) {
    const std::vector<double>& s = g->sorted;
    x[k] = static_cast<float>(static_cast<double>(s.size()) / window);  // how much this group has seen
    if (!s.empty()) {
      x[k + 1] = squash(sorted_percentile(s, 0.1));
      x[k + 2] = squash(sorted_percentile(s, 0.5));
      x[k + 3] = squash(sorted_percentile(s, 0.9));
    }
    k += 4;
  }
  x[k++] = static_cast<float>(std::log2(std::max(f.gpus, 1)) / 4);
  // Hour of the day on the driver's clock (Philly's traces start at midnight): people submit
  // short debugging runs by day and long ones for the night.
  const double day_phase = 2 * std::numbers::pi * std::fmod(std::max(f.submit, 0.0), 86400.0) / 86400.0;
  x[k++] = static_cast<float>(std::sin(day_phase));
  x[k++] = static_cast<float>(std::cos(day_phase));
  EMBER_CHECK(k == kQuantileInputs, "quantile_inputs: filled ", k, " of ", kQuantileInputs);
  return x;
}

QuantileNet::QuantileNet(int hidden, uint64_t seed) {
  EMBER_CHECK(hidden >= 1, "quantile predictor: hidden must be >= 1 unit, got ", hidden);
  Generator gen(seed);
  l1_ = std::make_shared<nn::Linear>(kQuantileInputs, hidden);
  out_ = std::make_shared<nn::Linear>(hidden, kQuantiles);
  skip_ = std::make_shared<nn::Linear>(kQuantileInputs, kQuantiles, nn::LinearOptions{.bias = false});
  l1_->reset_parameters(&gen);
  {
    NoGradGuard guard;
    out_->weight.zero_();
    out_->bias.zero_();
    std::vector<float> w(kQuantiles * kQuantileInputs, 0.0f);
    for (int q = 0; q < kQuantiles; ++q) w[q * kQuantileInputs] = 1.0f;  // every quantile = the history's answer
    skip_->weight.copy_(from_vector(w, {kQuantiles, kQuantileInputs}));
  }
  register_module("l1", l1_);
  register_module("out", out_);
  register_module("skip", skip_);
}

std::vector<Tensor> QuantileNet::correction_parameters() const {
  std::vector<Tensor> p = l1_->parameters(), o = out_->parameters();
  p.insert(p.end(), o.begin(), o.end());
  return p;
}

std::vector<Tensor> QuantileNet::skip_parameters() const {
  return skip_->parameters();
}

Tensor QuantileNet::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 2 && x.size(1) == kQuantileInputs, "QuantileNet: expected inputs [n, ", kQuantileInputs,
              "], got ", shape_str(x.shape()));
  return out_->forward(l1_->forward(x).tanh()) + skip_->forward(x);
}

Tensor pinball_loss(const Tensor& pred, const Tensor& target) {
  EMBER_CHECK(pred.dim() == 2 && pred.size(1) == kQuantiles && target.dim() == 2 && target.size(1) == 1 &&
                  target.size(0) == pred.size(0),
              "pinball_loss: expected predictions [n, ", kQuantiles, "] and targets [n, 1], got ",
              shape_str(pred.shape()), " and ", shape_str(target.shape()));
  std::vector<double> tau(kQuantileLevels.begin(), kQuantileLevels.end()), rest(kQuantiles);
  for (int q = 0; q < kQuantiles; ++q) rest[q] = 1 - tau[q];
  const TensorOptions opts{.dtype = pred.dtype(), .device = pred.device()};
  const Tensor under = (target - pred).relu(), over = (pred - target).relu();
  const Tensor loss = under * from_vector(tau, {1, kQuantiles}, opts) + over * from_vector(rest, {1, kQuantiles}, opts);
  return loss.sum({1}).mean();
}

QuantilePredictor::QuantilePredictor(QuantileOptions opt) : opt_(opt), history_(opt.history), rng_(opt.seed) {
  EMBER_CHECK(opt_.refit >= 1, "quantile predictor: refit must be >= 1 finished job, got ", opt_.refit);
  EMBER_CHECK(opt_.steps >= 0, "quantile predictor: steps must be >= 0, got ", opt_.steps);
  EMBER_CHECK(opt_.batch >= 1, "quantile predictor: batch must be >= 1 job, got ", opt_.batch);
  EMBER_CHECK(opt_.memory >= 1, "quantile predictor: memory must be >= 1 job, got ", opt_.memory);
  EMBER_CHECK(opt_.lr > 0 && std::isfinite(opt_.lr), "quantile predictor: lr must be > 0, got ", opt_.lr);
  EMBER_CHECK(opt_.decay >= 0 && std::isfinite(opt_.decay), "quantile predictor: decay must be >= 0, got ", opt_.decay);
  auto it = std::find_if(kQuantileLevels.begin(), kQuantileLevels.end(),
                         [&](double l) { return std::abs(l - opt_.quantile) < 1e-9; });
  EMBER_CHECK(it != kQuantileLevels.end(),
              "quantile predictor: quantile must be one of 0.1, 0.25, 0.5, 0.75, 0.9, got ", opt_.quantile);
  level_ = static_cast<int>(it - kQuantileLevels.begin());
  net_ = std::make_shared<QuantileNet>(opt_.hidden, opt_.seed);
}

std::array<double, kQuantiles> QuantilePredictor::quantiles(const SubmitFeatures& f, double at) {
  return quantiles_of(quantile_inputs(history_, f, at));
}

std::array<double, kQuantiles> QuantilePredictor::quantiles_of(const std::array<float, kQuantileInputs>& x) {
  std::vector<float> q;
  {
    NoGradGuard guard;
    q = net_->forward(from_vector(std::vector<float>(x.begin(), x.end()), {1, kQuantileInputs})).to_vector<float>();
  }
  std::sort(q.begin(), q.end());  // quantiles trained apart may cross; their order may not
  std::array<double, kQuantiles> s{};
  for (int i = 0; i < kQuantiles; ++i) s[i] = std::exp(10.0 * std::clamp(q[i], 0.0f, 2.0f));
  return s;
}

double QuantilePredictor::guess(const SubmitFeatures& f) {
  const auto x = quantile_inputs(history_, f, f.submit);
  pending_.emplace(job_key(f), x);
  // Until the first fit the model is the history predictor; its answer is taken as it is rather
  // than through float rounding.
  return fits_ == 0 ? history_.predict(f) : quantiles_of(x)[level_];
}

double QuantilePredictor::guess_given(const SubmitFeatures& f, double now, double ran) {
  if (fits_ > 0)
    for (double q : quantiles(f, now))
      if (q > ran) return q;
  return history_.predict_given(f, now, ran);
}

void QuantilePredictor::learn(const SubmitFeatures& f, double run_time, double finish) {
  std::array<float, kQuantileInputs> x{};
  auto it = pending_.find(job_key(f));
  if (it != pending_.end()) {
    x = it->second;
    pending_.erase(it);
  } else {
    x = quantile_inputs(history_, f, finish);  // never asked about (told by another driver): known now
  }
  history_.observe(f, run_time, finish);
  memory_.emplace_back(x, squash(run_time));
  if (static_cast<int>(memory_.size()) > opt_.memory) memory_.pop_front();
  if (++since_fit_ >= opt_.refit) fit();
}

Tensor QuantilePredictor::loss_on(const std::vector<const Remembered*>& jobs) {
  std::vector<float> x, y;
  for (const Remembered* m : jobs) {
    x.insert(x.end(), m->first.begin(), m->first.end());
    y.push_back(m->second);
  }
  return pinball_loss(net_->forward(rows_tensor(x)), from_vector(y, {static_cast<int64_t>(y.size()), 1}));
}

double QuantilePredictor::memory_loss() {
  std::vector<const Remembered*> all;
  for (const Remembered& m : memory_) all.push_back(&m);
  NoGradGuard guard;
  return loss_on(all).item();
}

void QuantilePredictor::fit() {
  since_fit_ = 0;
  if (!adam_) {
    // Decay pulls the correction (the MLP) towards zero, never the skip: the prediction shrinks
    // towards the history predictor's answer, not towards one second.
    std::vector<optim::ParamGroup> groups = {{net_->correction_parameters(), {}},
                                             {net_->skip_parameters(), {{"weight_decay", 0.0}}}};
    adam_ = std::make_unique<optim::AdamW>(std::move(groups),
                                           optim::AdamWOptions{.lr = opt_.lr, .weight_decay = opt_.decay});
  }
  loss_before_ = memory_loss();
  std::uniform_int_distribution<size_t> pick(0, memory_.size() - 1);
  std::vector<const Remembered*> batch(static_cast<size_t>(opt_.batch));
  for (int step = 0; step < opt_.steps; ++step) {
    for (const Remembered*& m : batch) m = &memory_[pick(rng_)];
    adam_->zero_grad();
    loss_on(batch).backward();
    adam_->step();
  }
  loss_after_ = memory_loss();
  ++fits_;
}

std::unique_ptr<DurationPredictor> make_quantile_predictor(const PolicyParams& params) {
  ParamReader r("quantile", params);
  QuantileOptions o;
  o.refit = static_cast<int>(r.number("refit", o.refit, 1, 1e9));
  o.steps = static_cast<int>(r.number("steps", o.steps, 0, 1e6));
  o.batch = static_cast<int>(r.number("batch", o.batch, 1, 1e6));
  o.memory = static_cast<int>(r.number("memory", o.memory, 1, 1e8));
  o.hidden = static_cast<int>(r.number("hidden", o.hidden, 1, 4096));
  o.lr = r.number("lr", o.lr, 1e-9, 10);
  o.decay = r.number("decay", o.decay, 0, 1e3);
  o.quantile = r.number("quantile", o.quantile, 0, 1);
  o.seed = static_cast<uint64_t>(r.number("seed", static_cast<double>(o.seed), 0, 9007199254740992.0));
  r.finish();
  o.history = history_options(params);
  return std::make_unique<QuantilePredictor>(o);
}

}  // namespace ember::sched::learned
