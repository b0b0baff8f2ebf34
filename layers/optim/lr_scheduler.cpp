#include "layers/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace ember::optim {

namespace {
double cos_anneal(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1.0);
}
double get_key(const std::map<std::string, double>& m, const std::string& k, const char* who) {
  auto it = m.find(k);
  EMBER_CHECK(it != m.end(), who, ".load_state_dict: missing entry '", k, "'");
  return it->second;
}
}  // namespace

// ------------------------------------------------------------------ base

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.options.at("lr"));
}

void LRScheduler::initial_step() {
  step();
}

void LRScheduler::step() {
  ++last_epoch_;
  auto& groups = optimizer_.param_groups();
  EMBER_CHECK(groups.size() == base_lrs_.size(), "LRScheduler: the optimizer has ", groups.size(),
              " parameter groups but the schedule was made for ", base_lrs_.size());
  last_lr_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    last_lr_[g] = lr_at(g, last_epoch_);
    groups[g].options["lr"] = last_lr_[g];
  }
  on_step();
}

std::map<std::string, double> LRScheduler::state_dict() const {
  std::map<std::string, double> s{{"last_epoch", static_cast<double>(last_epoch_)}};
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    s["base_lr." + std::to_string(g)] = base_lrs_[g];
    s["last_lr." + std::to_string(g)] = g < last_lr_.size() ? last_lr_[g] : base_lrs_[g];
  }
  return s;
}

void LRScheduler::load_state_dict(const std::map<std::string, double>& s) {
  const int64_t epoch = static_cast<int64_t>(get_key(s, "last_epoch", "LRScheduler"));
  std::vector<double> base(base_lrs_.size()), last(base_lrs_.size());
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    base[g] = get_key(s, "base_lr." + std::to_string(g), "LRScheduler");
    last[g] = get_key(s, "last_lr." + std::to_string(g), "LRScheduler");
  }
  last_epoch_ = epoch;
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ------------------------------------------------------------------ step / multistep / exponential

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  EMBER_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

double StepLR::lr_at(size_t g, int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

double MultiStepLR::lr_at(size_t g, int64_t epoch) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}

double ExponentialLR::lr_at(size_t g, int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(epoch));
}

// ------------------------------------------------------------------ cosine with warmup

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, CosineAnnealingOptions options)
    : LRScheduler(optimizer), o_(options) {
  EMBER_CHECK(o_.warmup_steps >= 0, "CosineAnnealingLR: warmup_steps must be >= 0, got ", o_.warmup_steps);
  EMBER_CHECK(o_.t_max > o_.warmup_steps, "CosineAnnealingLR: t_max (", o_.t_max,
              ") must be greater than warmup_steps (", o_.warmup_steps, ")");
  EMBER_CHECK(o_.warmup_start_factor >= 0 && o_.warmup_start_factor <= 1,
              "CosineAnnealingLR: warmup_start_factor must be in [0, 1], got ", o_.warmup_start_factor);
  initial_step();
}

double CosineAnnealingLR::lr_at(size_t g, int64_t epoch) const {
  const double base = base_lrs_[g];
  if (epoch < o_.warmup_steps) {
    const double f = o_.warmup_start_factor +
                     (1.0 - o_.warmup_start_factor) * static_cast<double>(epoch) / static_cast<double>(o_.warmup_steps);
    return base * f;
  }
  const double pct = static_cast<double>(epoch - o_.warmup_steps) / static_cast<double>(o_.t_max - o_.warmup_steps);
  return o_.eta_min + (base - o_.eta_min) * (1.0 + std::cos(std::numbers::pi * pct)) / 2.0;
}

// ------------------------------------------------------------------ one cycle

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleOptions options)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr), options) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, OneCycleOptions options)
    : LRScheduler(optimizer), o_(options) {
  auto& groups = optimizer_.param_groups();
  EMBER_CHECK(o_.total_steps > 0, "OneCycleLR: total_steps must be positive, got ", o_.total_steps);
  EMBER_CHECK(o_.pct_start >= 0 && o_.pct_start <= 1, "OneCycleLR: pct_start must be in [0, 1], got ", o_.pct_start);
  EMBER_CHECK(max_lrs.size() == groups.size(), "OneCycleLR: ", max_lrs.size(), " max_lr values for ", groups.size(),
              " parameter groups");
  const double total = static_cast<double>(o_.total_steps);
  if (o_.three_phase) {
    phases_ = {{o_.pct_start * total - 1, Level::Initial, Level::Max, true, false},
               {2 * o_.pct_start * total - 2, Level::Max, Level::Initial, false, true},
               {total - 1, Level::Initial, Level::Min, true, true}};
  } else {
    phases_ = {{o_.pct_start * total - 1, Level::Initial, Level::Max, true, false},
               {total - 1, Level::Max, Level::Min, false, true}};
  }
  if (o_.cycle_momentum) {
    const Hyperparams& d = optimizer_.defaults();
    momentum_key_ = d.count("momentum") ? "momentum" : d.count("beta1") ? "beta1" : "";
    EMBER_CHECK(!momentum_key_.empty(), "OneCycleLR: ", optimizer_.name(),
                " has no momentum or beta1 to cycle; pass cycle_momentum = false");
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    initial_.push_back(max_lrs[g] / o_.div_factor);
    max_.push_back(max_lrs[g]);
    min_.push_back(initial_.back() / o_.final_div_factor);
    groups[g].options["lr"] = initial_.back();
    base_lrs_[g] = initial_.back();
  }
  initial_step();
}

double OneCycleLR::level(size_t g, Level l) const {
  switch (l) {
    case Level::Initial:
      return initial_[g];
    case Level::Max:
      return max_[g];
    case Level::Min:
      return min_[g];
  }
  return 0;
}

std::pair<size_t, double> OneCycleLR::locate(int64_t epoch) const {
  EMBER_CHECK(epoch <= o_.total_steps, "OneCycleLR: tried to step ", epoch,
              " times; the schedule has total_steps = ", o_.total_steps);
  const double s = static_cast<double>(epoch);
  double start = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const double end = phases_[i].end_step;
    if (s <= end || i + 1 == phases_.size()) return {i, (s - start) / (end - start)};
    start = end;
  }
  return {phases_.size() - 1, 1.0};
}

double OneCycleLR::lr_at(size_t g, int64_t epoch) const {
  auto [i, pct] = locate(epoch);
  return cos_anneal(level(g, phases_[i].lr_from), level(g, phases_[i].lr_to), pct);
}

void OneCycleLR::on_step() {
  if (momentum_key_.empty()) return;
  auto [i, pct] = locate(last_epoch_);
  const double from = phases_[i].momentum_from_max ? o_.max_momentum : o_.base_momentum;
  const double to = phases_[i].momentum_to_max ? o_.max_momentum : o_.base_momentum;
  const double m = cos_anneal(from, to, pct);
  for (auto& g : optimizer_.param_groups()) g.options[momentum_key_] = m;
}

// ------------------------------------------------------------------ reduce on plateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(optimizer), o_(std::move(options)) {
  EMBER_CHECK(o_.factor < 1.0 && o_.factor >= 0, "ReduceLROnPlateau: factor must be in [0, 1), got ", o_.factor);
  const size_t n = optimizer_.param_groups().size();
  if (o_.min_lrs.empty()) o_.min_lrs.assign(n, o_.min_lr);
  EMBER_CHECK(o_.min_lrs.size() == n, "ReduceLROnPlateau: ", o_.min_lrs.size(), " min_lrs for ", n,
              " parameter groups");
  best_ = o_.mode == ReduceLROnPlateauOptions::Mode::Min ? std::numeric_limits<double>::infinity()
                                                         : -std::numeric_limits<double>::infinity();
  for (const auto& g : optimizer_.param_groups()) last_lr_.push_back(g.options.at("lr"));
}

bool ReduceLROnPlateau::is_better(double a) const {
  using M = ReduceLROnPlateauOptions::Mode;
  using T = ReduceLROnPlateauOptions::ThresholdMode;
  const bool rel = o_.threshold_mode == T::Rel;
  if (o_.mode == M::Min) return rel ? a < best_ * (1.0 - o_.threshold) : a < best_ - o_.threshold;
  return rel ? a > best_ * (1.0 + o_.threshold) : a > best_ + o_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_ = 0;
  } else {
    ++num_bad_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_ = 0;
  }
  auto& groups = optimizer_.param_groups();
  if (num_bad_ > o_.patience) {
    for (size_t g = 0; g < groups.size(); ++g) {
      const double old_lr = groups[g].options.at("lr");
      const double new_lr = std::max(old_lr * o_.factor, o_.min_lrs[g]);
      if (old_lr - new_lr > o_.eps) groups[g].options["lr"] = new_lr;
    }
    cooldown_counter_ = o_.cooldown;
    num_bad_ = 0;
  }
  last_lr_.clear();
  for (const auto& g : groups) last_lr_.push_back(g.options.at("lr"));
}

std::map<std::string, double> ReduceLROnPlateau::state_dict() const {
  return {{"last_epoch", static_cast<double>(last_epoch_)},
          {"best", best_},
          {"num_bad_epochs", static_cast<double>(num_bad_)},
          {"cooldown_counter", static_cast<double>(cooldown_counter_)}};
}

void ReduceLROnPlateau::load_state_dict(const std::map<std::string, double>& s) {
  const double e = get_key(s, "last_epoch", "ReduceLROnPlateau"), b = get_key(s, "best", "ReduceLROnPlateau"),
               nb = get_key(s, "num_bad_epochs", "ReduceLROnPlateau"),
               cc = get_key(s, "cooldown_counter", "ReduceLROnPlateau");
  last_epoch_ = static_cast<int64_t>(e);
  best_ = b;
  num_bad_ = static_cast<int64_t>(nb);
  cooldown_counter_ = static_cast<int64_t>(cc);
}

}  // namespace ember::optim
