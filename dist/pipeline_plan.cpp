#include "dist/pipeline_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/error.h"

namespace ember::dist {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Memory saturates instead of wrapping: a stage that would need more than int64 bytes fits no
// device but the unlimited one.
int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kUnlimited : r;
}
int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? kUnlimited : r;
}

std::string bytes_str(int64_t b) {
  if (b == kUnlimited) return "unlimited";
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  else
    std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string time_str(double s) {
  char buf[32];
  if (s == 0)
    return "0 s";
  else if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3f us", s * 1e6);
  return buf;
}

std::string micro_batches_str(int m) {
  return std::to_string(m) + (m == 1 ? " micro-batch" : " micro-batches");
}

std::string layer_label(const std::vector<LayerCost>& layers, int i) {
  const std::string& n = layers[static_cast<size_t>(i)].name;
  return n.empty() ? std::string("layer ").append(std::to_string(i)) : n;
}

void check_inputs(const std::vector<LayerCost>& layers, const std::vector<DeviceSpec>& devices, const PlanOptions& o) {
  EMBER_CHECK(!layers.empty(), "pipeline plan: expected at least one layer, got none");
  EMBER_CHECK(!devices.empty(), "pipeline plan: expected at least one device (one per stage), got none");
  EMBER_CHECK(layers.size() < static_cast<size_t>(std::numeric_limits<int>::max()), "pipeline plan: ", layers.size(),
              " layers are more than it plans");
  EMBER_CHECK(layers.size() >= devices.size(), "pipeline plan: ", layers.size(), " layers cannot fill ", devices.size(),
              " stages (every stage needs at least one layer)");
  EMBER_CHECK(o.micro_batches >= 1, "pipeline plan: expected at least one micro-batch, got ", o.micro_batches);
  EMBER_CHECK(o.input_bytes >= 0, "pipeline plan: input_bytes must be >= 0, got ", o.input_bytes);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCost& l = layers[i];
    auto what = [&](const char* field) {
      return detail::concat("pipeline plan: layer ", i, " ('", l.name, "') ", field);
    };
    EMBER_CHECK(std::isfinite(l.forward_s) && l.forward_s >= 0, what("forward_s"), " must be finite and >= 0, got ",
                l.forward_s);
    EMBER_CHECK(std::isfinite(l.backward_s) && l.backward_s >= 0, what("backward_s"), " must be finite and >= 0, got ",
                l.backward_s);
    EMBER_CHECK(l.activation_bytes >= 0, what("activation_bytes"), " must be >= 0, got ", l.activation_bytes);
    EMBER_CHECK(l.output_bytes >= 0, what("output_bytes"), " must be >= 0, got ", l.output_bytes);
    EMBER_CHECK(l.state_bytes >= 0, what("state_bytes"), " must be >= 0, got ", l.state_bytes);
  }
  for (size_t k = 0; k < devices.size(); ++k) {
    EMBER_CHECK(std::isfinite(devices[k].speed) && devices[k].speed > 0, "pipeline plan: device ", k,
                " speed must be finite and > 0, got ", devices[k].speed);
    EMBER_CHECK(devices[k].memory_bytes > 0, "pipeline plan: device ", k, " memory_bytes must be > 0, got ",
                devices[k].memory_bytes);
  }
}

// Stage costs over layers [i, j) on device k, from prefix sums.
class StageCosts {
 public:
  StageCosts(const std::vector<LayerCost>& layers, const std::vector<DeviceSpec>& devices, const PlanOptions& o)
      : L(static_cast<int>(layers.size())), K(static_cast<int>(devices.size())), o_(o), devices_(devices) {
    time_.assign(static_cast<size_t>(L) + 1, 0.0);
    act_.assign(static_cast<size_t>(L) + 1, 0);
    state_.assign(static_cast<size_t>(L) + 1, 0);
    for (int i = 0; i < L; ++i) {
      const LayerCost& l = layers[static_cast<size_t>(i)];
      time_[i + 1] = time_[i] + (l.forward_s + l.backward_s);
      EMBER_CHECK(!__builtin_add_overflow(act_[i], l.activation_bytes, &act_[i + 1]) &&
                      !__builtin_add_overflow(state_[i], l.state_bytes, &state_[i + 1]),
                  "pipeline plan: the layers' activation or state bytes add up to more than int64 holds");
      input_.push_back(i == 0 ? o.input_bytes : layers[static_cast<size_t>(i) - 1].output_bytes);
    }
    EMBER_CHECK(std::isfinite(time_[L]), "pipeline plan: the layers' times add up to more than a double holds");
    for (int k = 0; k < K; ++k) in_flight_.push_back(pipeline_in_flight(o.schedule, K, k, o.micro_batches));
  }

  // Costs are >= 0, so time grows as a stage takes more layers: the planner prunes on that.
  double time(int k, int i, int j) const { return (time_[j] - time_[i]) / devices_[k].speed; }
  int64_t memory(int k, int i, int j) const {
    const int64_t state = state_[j] - state_[i], act = act_[j] - act_[i];
    if (o_.recompute) return add_sat(state, add_sat(mul_sat(in_flight_[k], input_[i]), act));
    return add_sat(state, mul_sat(in_flight_[k], act));
  }
  bool fits(int k, int i, int j) const { return memory(k, i, j) <= devices_[k].memory_bytes; }
  double overflow(int k, int i, int j) const {
    return static_cast<double>(memory(k, i, j)) / static_cast<double>(devices_[k].memory_bytes);
  }

  const int L, K;

 private:
  const PlanOptions& o_;
  const std::vector<DeviceSpec>& devices_;
  std::vector<double> time_;
  std::vector<int64_t> act_, state_, input_;
  std::vector<int> in_flight_;
};

// best[j]: the least bottleneck of stages 0..k over layers [0, j), stage by stage. Stage k can
// end at j in [k + 1, L - (K - 1 - k)] (every later stage needs a layer).
double least_bottleneck(const StageCosts& c) {
  const int L = c.L, K = c.K;
  std::vector<double> prev(static_cast<size_t>(L) + 1, kInf), cur(prev.size());
  for (int j = 1; j <= L - (K - 1); ++j) prev[j] = c.fits(0, 0, j) ? c.time(0, 0, j) : kInf;
  for (int k = 1; k < K; ++k) {
    std::fill(cur.begin(), cur.end(), kInf);
    for (int j = k + 1; j <= L - (K - 1 - k); ++j) {
      double best = kInf;
      // From the shortest last stage up: once that stage alone is no better, no longer one is.
      for (int i = j - 1; i >= k; --i) {
        const double t = c.time(k, i, j);
        if (t >= best) break;
        if (prev[i] == kInf || !c.fits(k, i, j)) continue;
        best = std::min(best, std::max(prev[i], t));
      }
      cur[j] = best;
    }
    std::swap(prev, cur);
  }
  return prev[L];
}

// The lexicographically smallest boundaries among partitions whose stages all fit and take at most
// `bottleneck`: done[k][i] says whether layers [i, L) can be split so into stages k..K-1; then
// each stage, in order, ends at the first layer from which the rest can be done.
std::vector<int> earliest_boundaries(const StageCosts& c, double bottleneck) {
  const int L = c.L, K = c.K;
  std::vector<std::vector<char>> done(static_cast<size_t>(K) + 1, std::vector<char>(static_cast<size_t>(L) + 1, 0));
  done[K][L] = 1;
  auto next_end = [&](int k, int i) {
    for (int j = i + 1; j <= L - (K - 1 - k); ++j) {
      if (c.time(k, i, j) > bottleneck) break;
      if (done[k + 1][j] && c.fits(k, i, j)) return j;
    }
    return -1;
  };
  for (int k = K - 1; k >= 0; --k)
    for (int i = k; i <= L - (K - k); ++i) done[k][i] = next_end(k, i) >= 0;
  std::vector<int> ends;
  for (int k = 0, i = 0; k < K; ++k) {
    i = next_end(k, i);
    EMBER_CHECK(i >= 0, "pipeline plan: internal error: no partition reaches the bottleneck it found");
    ends.push_back(i);
  }
  return ends;
}

// No partition fits: the one whose worst stage overflows its device by the least factor, for the
// message. Stage ends, the first of equals.
std::vector<int> closest_to_fitting(const StageCosts& c) {
  const int L = c.L, K = c.K;
  std::vector<std::vector<int>> from(static_cast<size_t>(K), std::vector<int>(static_cast<size_t>(L) + 1, -1));
  std::vector<double> prev(static_cast<size_t>(L) + 1, kInf), cur(prev.size());
  for (int j = 1; j <= L - (K - 1); ++j) prev[j] = c.overflow(0, 0, j);
  for (int k = 1; k < K; ++k) {
    std::fill(cur.begin(), cur.end(), kInf);
    for (int j = k + 1; j <= L - (K - 1 - k); ++j)
      for (int i = k; i < j; ++i) {
        const double r = std::max(prev[i], c.overflow(k, i, j));
        if (r < cur[j] || from[k][j] < 0) cur[j] = r, from[k][j] = i;
      }
    std::swap(prev, cur);
  }
  std::vector<int> ends(static_cast<size_t>(K));
  for (int k = K - 1, j = L; k >= 0; --k) {
    ends[k] = j;
    j = k > 0 ? from[k][j] : 0;
  }
  return ends;
}

[[noreturn]] void fail_no_fit(const StageCosts& c, const std::vector<LayerCost>& layers,
                              const std::vector<DeviceSpec>& devices, const PlanOptions& o) {
  const std::vector<int> ends = closest_to_fitting(c);
  int worst = 0;
  double worst_ratio = -1;
  std::ostringstream firsts;
  for (int k = 0, i = 0; k < c.K; i = ends[k], ++k) {
    firsts << (k ? ", " : "") << i;
    const double r = c.overflow(k, i, ends[k]);
    if (r > worst_ratio) worst = k, worst_ratio = r;
  }
  const int first = worst == 0 ? 0 : ends[worst - 1], last = ends[worst] - 1;
  const int64_t need = c.memory(worst, first, ends[worst]), cap = devices[worst].memory_bytes;
  std::ostringstream os;
  os << "pipeline plan: no partition of " << c.L << " layers into " << c.K << " stages fits the devices' memory ("
     << pipeline_schedule_name(o.schedule) << ", " << micro_batches_str(o.micro_batches)
     << (o.recompute ? ", recompute" : "") << "): even the partition closest to fitting (stages starting at layers "
     << firsts.str() << ") needs " << bytes_str(need) << " (" << need << " bytes) on stage " << worst << " (layers "
     << first << ".." << last << ", " << layer_label(layers, first);
  if (last != first) os << " .. " << layer_label(layers, last);
  os << "), and device " << worst << " has " << bytes_str(cap) << " (" << cap << " bytes), " << std::setprecision(3)
     << worst_ratio << "x too little; every other partition overflows some device by more";
  std::string ways;
  if (o.schedule == PipelineSchedule::GPipe && c.K > 1) ways += "1F1B, ";
  if (o.micro_batches > 1) ways += "fewer micro-batches, ";
  if (!o.recompute) ways += "recompute, ";
  os << " (" << ways << "more or larger devices would lower it)";
  throw Error(os.str());
}

}  // namespace

std::vector<int> PipelinePlan::boundaries() const {
  std::vector<int> out;
  for (const StagePlan& s : stages) out.push_back(s.first);
  return out;
}

std::string PipelinePlan::table(const std::vector<LayerCost>& layers) const {
  EMBER_CHECK(!stages.empty() && stages.back().end == static_cast<int>(layers.size()),
              "PipelinePlan::table: the plan covers ", stages.empty() ? 0 : stages.back().end, " layers, got ",
              layers.size());
  std::ostringstream os;
  os << "pipeline plan: " << layers.size() << " layers on " << stages.size() << " stages, "
     << pipeline_schedule_name(options.schedule) << ", " << micro_batches_str(options.micro_batches)
     << (options.recompute ? ", recompute" : "") << "; bottleneck " << time_str(bottleneck_s)
     << " per micro-batch, step " << time_str(step_s) << " (M + K - 1 bottlenecks)\n";
  os << std::left << std::setw(7) << "stage" << std::setw(12) << "layers" << std::setw(14) << "time/micro"
     << std::setw(12) << "memory" << std::setw(12) << "device cap"
     << "names\n";
  for (size_t k = 0; k < stages.size(); ++k) {
    const StagePlan& s = stages[k];
    std::string range = std::to_string(s.first);
    std::string names = layer_label(layers, s.first);
    if (s.end - 1 > s.first) {
      range.append("..").append(std::to_string(s.end - 1));
      names += " .. " + layer_label(layers, s.end - 1);
    }
    os << std::setw(7) << k << std::setw(12) << range << std::setw(14) << time_str(s.time_s) << std::setw(12)
       << bytes_str(s.memory_bytes) << std::setw(12) << bytes_str(s.memory_cap_bytes) << names << "\n";
  }
  return os.str();
}

PipelinePlan plan_pipeline(const std::vector<LayerCost>& layers, const std::vector<DeviceSpec>& devices,
                           const PlanOptions& o) {
  check_inputs(layers, devices, o);
  const StageCosts c(layers, devices, o);
  const double bottleneck = least_bottleneck(c);
  if (bottleneck == kInf) fail_no_fit(c, layers, devices, o);
  PipelinePlan plan;
  plan.options = o;
  int first = 0;
  for (int end : earliest_boundaries(c, bottleneck)) {
    const int k = static_cast<int>(plan.stages.size());
    plan.stages.push_back({first, end, c.time(k, first, end), c.memory(k, first, end), devices[k].memory_bytes});
    first = end;
  }
  plan.bottleneck_s = bottleneck;
  plan.step_s = static_cast<double>(o.micro_batches + c.K - 1) * bottleneck;
  return plan;
}

}  // namespace ember::dist
