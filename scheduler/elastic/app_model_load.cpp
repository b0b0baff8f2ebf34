// The readers of one app's folder of Pollux's artifact (AppModel::load): placements.csv,
// scalability.csv and validation-B.csv, each problem an ember::Error naming the file and line.
#include <algorithm>
#include <filesystem>
#include <tuple>

#include "core/error.h"
#include "scheduler/elastic/app_model.h"
#include "scheduler/elastic/csv_table.h"

namespace ember::sched::elastic {
namespace {

namespace fs = std::filesystem;

// (replicas, nodes, per-GPU batch) -> summed times and count: the mean of every measurement there.
using Sums = std::map<std::tuple<int, int, double>, std::pair<StepTime, int>>;

void add(Sums& s, int replicas, int nodes, double local, StepTime t) {
  auto& [sum, n] = s[{replicas, nodes, local}];
  sum.step += t.step;
  sum.sync += t.sync;
  ++n;
}

// Bounds far beyond the artifact's (steps of at most 3.1 s, per-GPU batches of at most 32768,
// placements of at most 4 nodes, gradient statistics below 1e16) that keep every sum, mean and
// gain the models compute finite and every batch an int.
constexpr double kMaxStepTime = 1e6;  // seconds
constexpr long kMaxLocalBatch = 1L << 24;
constexpr size_t kMaxPlacementNodes = 64;
constexpr double kMaxGradStat = 1e100;

// The sync time is part of the step (accumulation passes repeat the rest): at most the step time.
StepTime read_time(const CsvTable& t, size_t i, int step_col, int sync_col) {
  const StepTime s{t.number(i, step_col, 0), t.number(i, sync_col, 0)};
  EMBER_CHECK(s.step > 0 && s.step <= kMaxStepTime && s.sync <= s.step, t.source, ":", t.lines[i],
              ": expected 0 < step_time <= ", kMaxStepTime, " s and sync_time <= step_time, got ", s.step, " and ",
              s.sync);
  return s;
}

double read_local(const CsvTable& t, size_t i, int c) {
  const long b = t.integer(i, c, 1);
  EMBER_CHECK(b <= kMaxLocalBatch, t.source, ":", t.lines[i], ": column 'local_bsz': expected at most ", kMaxLocalBatch,
              " samples per GPU, got ", b);
  return static_cast<double>(b);
}

}  // namespace

void AppModel::load_placements(const std::string& path) {
  const CsvTable t = read_csv_table(path);
  const int pc = t.column("placement"), bc = t.column("local_bsz");
  const int sc = t.column("step_time"), yc = t.column("sync_time");
  std::map<std::string, std::map<double, StepTime>> curves;
  Sums groups;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const std::string& p = t.text(i, pc);
    Shape shape;
    for (char c : p) {
      EMBER_CHECK(c >= '1' && c <= '9', path, ":", t.lines[i],
                  ": column 'placement': expected GPUs per node as digits 1-9 (e.g. 24), got '", p, "'");
      shape.push_back(c - '0');
    }
    EMBER_CHECK(!shape.empty() && shape.size() <= kMaxPlacementNodes, path, ":", t.lines[i],
                ": column 'placement': expected 1 to ", kMaxPlacementNodes, " nodes, got ", shape.size());
    const double local = read_local(t, i, bc);
    const StepTime s = read_time(t, i, sc, yc);
    curves[placement_id(shape)][local] = s;
    int r = 0;
    for (int g : shape) r += g;
    add(groups, r, static_cast<int>(shape.size()), local, s);
  }
  for (const auto& [id, c] : curves)
    for (const auto& [b, s] : c) {
      by_placement_[id].local.push_back(b);
      by_placement_[id].time.push_back(s);
    }
  for (const auto& [k, v] : groups) {
    Curve& c = by_shape_[{std::get<0>(k), std::get<1>(k)}];
    c.local.push_back(std::get<2>(k));
    c.time.push_back({v.first.step / v.second, v.first.sync / v.second});
  }
  limits_.min_local = static_cast<int>(read_local(t, 0, bc));
  limits_.max_local = limits_.min_local;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    limits_.min_local = std::min(limits_.min_local, static_cast<int>(read_local(t, i, bc)));
    limits_.max_local = std::max(limits_.max_local, static_cast<int>(read_local(t, i, bc)));
  }
}

void AppModel::load_scalability(const std::string& path) {
  const CsvTable t = read_csv_table(path);
  const int nc = t.column("num_nodes"), rc = t.column("num_replicas"), bc = t.column("local_bsz");
  const int sc = t.column("step_time"), yc = t.column("sync_time");
  Sums sums;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const long nodes = t.integer(i, nc, 1), replicas = t.integer(i, rc, 1);
    EMBER_CHECK(nodes <= replicas && replicas <= 4096, path, ":", t.lines[i],
                ": expected 1 <= num_nodes <= num_replicas <= 4096, got ", nodes, " nodes and ", replicas, " replicas");
    add(sums, static_cast<int>(replicas), static_cast<int>(nodes), read_local(t, i, bc), read_time(t, i, sc, yc));
  }
  const auto measured = by_shape_;
  for (const auto& [k, v] : sums) {
    EMBER_CHECK(!measured.count({std::get<0>(k), std::get<1>(k)}), path, ": ", std::get<1>(k), " nodes with ",
                std::get<0>(k), " GPUs are measured in placements.csv too");
    Curve& c = by_shape_[{std::get<0>(k), std::get<1>(k)}];
    c.local.push_back(std::get<2>(k));
    c.time.push_back({v.first.step / v.second, v.first.sync / v.second});
  }
}

void AppModel::load_validation(const std::string& path, int batch) {
  const CsvTable t = read_csv_table(path);
  const int pc = t.column("progress"), sc = t.column("grad_sqr"), vc = t.column("grad_var");
  Validation v;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    v.progress.push_back(t.number(i, pc, 0));
    EMBER_CHECK(v.progress.back() > (i ? v.progress[i - 1] : 0.0), path, ":", t.lines[i],
                ": column 'progress': expected it to grow from row to row, got ", v.progress.back());
    v.grad.push_back({t.number(i, sc, 0), t.number(i, vc, 0)});
    EMBER_CHECK(v.grad.back().sqr <= kMaxGradStat && v.grad.back().var <= kMaxGradStat, path, ":", t.lines[i],
                ": expected grad_sqr and grad_var <= ", kMaxGradStat, " (the progress gain overflows beyond)");
  }
  validation_[batch] = std::move(v);
}

AppModel AppModel::load(const std::string& dir) {
  AppModel m;
  const fs::path root(dir);
  EMBER_CHECK(fs::is_directory(root), dir,
              ": not a folder (expected an app's traces: placements.csv, "
              "scalability.csv, validation-B.csv)");
  m.name_ = root.filename().string();
  if (m.name_.empty()) m.name_ = root.parent_path().filename().string();
  m.load_placements((root / "placements.csv").string());
  m.load_scalability((root / "scalability.csv").string());
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(root)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string n = f.filename().string();
    if (!n.starts_with("validation-") || !n.ends_with(".csv")) continue;
    const std::string b = n.substr(11, n.size() - 15);
    EMBER_CHECK(
        !b.empty() && b.size() < 9 && std::all_of(b.begin(), b.end(), [](char c) { return c >= '0' && c <= '9'; }),
        f.string(), ": expected validation-B.csv with B the global batch (a whole number)");
    EMBER_CHECK(std::stoi(b) >= 1, f.string(), ": the batch must be >= 1");
    m.load_validation(f.string(), std::stoi(b));
  }
  for (const auto& [k, c] : m.by_shape_)
    if (m.measured_counts_.empty() || m.measured_counts_.back() != k.first) m.measured_counts_.push_back(k.first);
  EMBER_CHECK(!m.validation_.empty(), dir, ": no validation-B.csv (the training progress at some batch B)");
  m.limits_.init_batch = m.validation_.begin()->first;
  m.limits_.max_batch = m.validation_.rbegin()->first;
  m.limits_.epochs = static_cast<int>(m.validation_.begin()->second.progress.size());
  for (const auto& [b, v] : m.validation_)
    m.limits_.epochs = std::min(m.limits_.epochs, static_cast<int>(v.progress.size()));
  // The artifact's one per-app limit that its data does not carry (applications.py): YOLOv3 holds
  // at most 8 images per GPU (its scalability.csv stops there too).
  if (m.name_ == "yolov3") m.limits_.max_local = std::min(m.limits_.max_local, 8);
  EMBER_CHECK(m.limits_.min_local <= m.limits_.max_local, dir, ": the smallest per-GPU batch measured, ",
              m.limits_.min_local, ", is above the ", m.limits_.max_local, " a GPU holds");
  EMBER_CHECK(m.limits_.max_batch >= m.limits_.min_local, dir, ": the largest validated batch ", m.limits_.max_batch,
              " is below the smallest per-GPU batch measured ", m.limits_.min_local);
  return m;
}

std::map<std::string, AppModel> load_apps(const std::string& traces_dir) {
  EMBER_CHECK(fs::is_directory(traces_dir), traces_dir,
              ": not a folder (expected one sub-folder per app, as in "
              "../shared/data/pollux/traces)");
  std::map<std::string, AppModel> apps;
  for (const auto& e : fs::directory_iterator(traces_dir))
    if (e.is_directory()) {
      AppModel m = AppModel::load(e.path().string());
      const std::string n = m.name();
      apps.emplace(n, std::move(m));
    }
  EMBER_CHECK(!apps.empty(), traces_dir, ": no app folders in it");
  return apps;
}

}  // namespace ember::sched::elastic
