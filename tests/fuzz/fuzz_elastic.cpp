// The readers of Pollux's artifact data (scheduler/elastic: ../shared/data/pollux). The input's
// first byte picks the reader (low two bits) and, for an app folder, whether the folder is named
// yolov3 (bit 2: the one app with a limit of its own); the rest is
//   0: an app folder (AppModel::load): files, each introduced by a line `#file NAME`
//      (placements.csv, scalability.csv, validation-B.csv, or any other name)
//   1: a workload (read_workload) against two fixed apps, cifar10 and the rigid ncf
//   2, 3: one CSV table (parse_csv_table)
// A folder that loads must answer every question the simulator and the policies ask of it with
// finite, positive times and gains (or an ember::Error); anything else aborts as a finding.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

#include "fuzz_support.h"
#include "scheduler/elastic/app_model.h"
#include "scheduler/elastic/csv_table.h"
#include "scheduler/elastic/workload.h"

namespace {

namespace fs = std::filesystem;
namespace el = ember::sched::elastic;

// A folder of this process's own beside its scratch file (in /dev/shm or TMPDIR), removed at exit.
const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    const fs::path d = fuzz::scratch_file(nullptr, 0, "") + ".d";
    std::atexit([] { fs::remove_all(fs::path(fuzz::scratch_path() + ".d")); });
    return d;
  }();
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) std::abort();
}

// Writes the `#file NAME` sections of `text` into a fresh `dir`. Names are cut to what a file
// name may hold here (no '/', at most 64 characters), so that nothing is written outside the folder.
void write_sections(const fs::path& dir, const std::string& text) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  size_t at = text.rfind("#file ", 0) == 0 ? 0 : text.find("\n#file ");
  int files = 0;
  while (at != std::string::npos && files++ < 16) {
    const size_t name_begin = text.find("#file ", at) + 6;
    const size_t name_end = std::min(text.find('\n', name_begin), text.size());
    std::string name;
    for (char c : text.substr(name_begin, name_end - name_begin))
      if ((std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_') && name.size() < 64)
        name += c;
    const size_t next = name_end >= text.size() ? std::string::npos : text.find("\n#file ", name_end);
    const size_t body = std::min(name_end + 1, text.size());
    if (!name.empty() && name != "." && name != "..")
      write(dir / name, text.substr(body, next == std::string::npos ? std::string::npos : next + 1 - body));
    at = next;
  }
}

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_elastic: a loaded app model broke its contract: %s\n", what);
  std::abort();
}

// What the simulator and the goodput policy ask of a model (elastic/simulator.cpp, policies/).
void use_model(const el::AppModel& m) {
  const el::AppLimits& l = m.limits();
  require(l.init_batch >= 1 && l.init_batch <= l.max_batch && l.min_local >= 1 && l.min_local <= l.max_local &&
              l.epochs >= 1,
          "limits");
  for (const el::Shape& s : {el::Shape{1}, el::Shape{2}, el::Shape{4, 4}, el::Shape{1, 3}, el::Shape{8, 8, 8},
                             el::Shape(20, 4), el::Shape{64}}) {
    for (double local : {1.0, static_cast<double>(l.min_local), static_cast<double>(l.max_local), 1e6}) {
      const el::StepTime t = m.step_time(s, local);
      require(std::isfinite(t.step) && t.step > 0 && t.sync >= 0 && t.sync <= t.step, "step_time");
    }
  }
  for (int e = 0; e < l.epochs; e += 1 + l.epochs / 4)
    for (double b :
         {static_cast<double>(l.init_batch), (l.init_batch + l.max_batch) / 2.0, static_cast<double>(l.max_batch)}) {
      const el::GradStats g = m.grad_stats(b, e);
      const double gain = el::progress_gain(g, b / l.init_batch);
      require(std::isfinite(gain) && gain > 0, "grad_stats / progress_gain");
    }
  require(std::isfinite(m.target_progress()) && m.target_progress() > 0, "target_progress");
  for (int r : {1, 2, 7, 64})
    for (long b : {static_cast<long>(l.init_batch), static_cast<long>(l.max_batch)}) {
      const el::BatchConfig c = m.rigid_config(r, b);
      require(c.atomic >= 1 && c.accum >= 0 && c.global(r) <= l.max_batch, "rigid_config");
    }
}

void app_folder(const std::string& text, bool yolov3) {
  const fs::path dir = scratch_dir() / (yolov3 ? "yolov3" : "app");
  write_sections(dir, text);
  use_model(el::AppModel::load(dir.string()));
}

// Two small apps, cut from the artifact's cifar10 and ncf folders.
const std::map<std::string, el::AppModel>& fixed_apps() {
  static const std::map<std::string, el::AppModel> apps = [] {
    const std::string scal = "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,8,64,0.2,0.1\n";
    const std::string val = "progress,iteration,metric,grad_sqr,grad_var\n391.0,390,0.44,8.9,5.0\n";
    std::map<std::string, el::AppModel> m;
    // Each app's smallest and largest validated batch, as in the artifact.
    for (const auto& [app, lo, hi] : {std::tuple{"cifar10", "128", "4096"}, std::tuple{"ncf", "256", "32768"}}) {
      const fs::path dir = scratch_dir() / "apps" / app;
      write_sections(dir, std::string("#file placements.csv\nplacement,local_bsz,step_time,sync_time\n") +
                              "1,32,0.04,0.0005\n1,64,0.06,0.0005\n4,64,0.07,0.01\n#file scalability.csv\n" + scal +
                              "#file validation-" + lo + ".csv\n" + val + "#file validation-" + hi + ".csv\n" + val);
      m.emplace(app, el::AppModel::load(dir.string()));
    }
    return m;
  }();
  return apps;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const int mode = data[0] & 3;
  fuzz::errors_only([&] {
    if (mode == 0) {
      app_folder(text, (data[0] & 4) != 0);
    } else if (mode == 1) {
      const auto& apps = fixed_apps();
      const fs::path path = scratch_dir() / "workload.csv";
      write(path, text);
      for (const el::JobRequest& j : el::read_workload(path.string(), apps))
        require(j.gpus >= 1 && j.batch >= 1 && std::isfinite(j.submit) && apps.count(j.app), "read_workload");
    } else {
      (void)el::parse_csv_table(text, "fuzz.csv");
    }
  });
  return 0;
}
