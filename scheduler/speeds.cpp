#include "scheduler/speeds.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ember::sched {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) {
    const size_t b = cell.find_first_not_of(" \t\r"), e = cell.find_last_not_of(" \t\r");
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace

SpeedTable SpeedTable::defaults() {
  return parse(
      "model,v100,a100,h100,h200\n"
      "cnn,1,2.2,3.0,3.1\n"
      "transformer,1,2.8,6.0,6.8\n"
      "lstm,1,1.8,2.6,2.7\n"
      "recommendation,1,2.5,4.0,4.8\n"
      "gan,1,1.9,2.6,2.7\n"
      "rl,1,1.1,1.2,1.2\n",
      "the default speed table");
}

SpeedTable SpeedTable::read(const std::string& path) {
  // A folder opens as a stream that reads nothing: say so instead of "expected a header".
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), "speed table '", path,
              "': is a folder, expected a CSV file 'model,TYPE,...'");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "speed table '", path, "': cannot open it (", std::strerror(errno), ")");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), "speed table '" + path + "'");
}

SpeedTable SpeedTable::parse(const std::string& text, const std::string& name) {
  SpeedTable t;
  std::istringstream in(text);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    std::vector<std::string> cells = split(line);
    if (t.types_.empty()) {
      EMBER_CHECK(cells.size() >= 2 && cells[0] == "model", name, ":", no,
                  ": expected a header 'model,TYPE,TYPE,...', got '", line, "'");
      for (size_t k = 1; k < cells.size(); ++k) {
        EMBER_CHECK(!cells[k].empty() && std::count(t.types_.begin(), t.types_.end(), cells[k]) == 0, name, ":", no,
                    ": device type '", cells[k], "' is empty or repeated");
        t.types_.push_back(cells[k]);
      }
      continue;
    }
    EMBER_CHECK(cells.size() == t.types_.size() + 1 && !cells[0].empty(), name, ":", no, ": expected a model and ",
                t.types_.size(), " speeds, got '", line, "'");
    EMBER_CHECK(!t.speed_.count(cells[0]), name, ":", no, ": model '", cells[0], "' appears twice");
    std::vector<double> v;
    for (size_t k = 1; k < cells.size(); ++k) {
      char* end = nullptr;
      const double x = std::strtod(cells[k].c_str(), &end);
      EMBER_CHECK(!cells[k].empty() && end == cells[k].c_str() + cells[k].size() && x > 0 && x < 1e6, name, ":", no,
                  ": model '", cells[0], "' on '", t.types_[k - 1], "': expected a speed > 0, got '", cells[k], "'");
      v.push_back(x);
    }
    t.models_.push_back(cells[0]);
    t.speed_[cells[0]] = std::move(v);
  }
  EMBER_CHECK(!t.types_.empty() && !t.models_.empty(), name, ": expected a header and at least one model");
  return t;
}

double SpeedTable::speed(const std::string& model, const std::string& type) const {
  auto m = speed_.find(model);
  EMBER_CHECK(m != speed_.end(), "speed table: no model '", model, "'");
  auto it = std::find(types_.begin(), types_.end(), type);
  EMBER_CHECK(it != types_.end(), "speed table: no device type '", type, "'");
  return m->second[it - types_.begin()];
}

void SpeedTable::check_types(const Topology& topo) const {
  for (int t = 0; t < topo.num_types(); ++t) {
    if (std::find(types_.begin(), types_.end(), topo.type_name(t)) != types_.end()) continue;
    std::string known;
    for (const std::string& k : types_) known += (known.empty() ? "" : ", ") + k;
    EMBER_FAIL("device type '", topo.type_name(t), "' is not in the speed table (its types: ", known, ")");
  }
}

void SpeedTable::assign_models(std::vector<JobSpec>& jobs) const {
  for (JobSpec& j : jobs) {
    if (j.model.empty()) {
      std::uint64_t h = 1469598103934665603ull;
      for (unsigned char c : j.name) h = (h ^ c) * 1099511628211ull;
      j.model = models_[h % models_.size()];
    }
    EMBER_CHECK(speed_.count(j.model), "job '", j.name, "': model '", j.model, "' is not in the speed table");
  }
}

}  // namespace ember::sched
