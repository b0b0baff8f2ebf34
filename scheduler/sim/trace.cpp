#include "scheduler/sim/trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"

namespace ember::sched {
namespace {

constexpr double kMaxTraceSeconds = 1e11;

struct Field {
  const char* name;
  std::vector<const char*> aliases;  // header names recognised without a mapping
  bool required;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"id", {"job_id", "id", "jobid", "name"}, false},
      {"submit", {"submit_time", "submit", "arrival", "arrival_time", "time"}, true},
      {"gpus", {"num_gpus", "num_gpu", "gpus", "gpu", "gpu_num"}, true},
      {"duration", {"duration", "runtime", "run_time"}, true},
      {"estimate", {"estimate", "estimated_duration", "time_limit"}, false},
      {"priority", {"priority"}, false},
      {"queue", {"vc", "queue", "team", "user"}, false},
      {"mem", {"mem_per_gpu", "gpu_mem", "mem"}, false},
      {"model", {"model", "model_name", "model_type"}, false},
  };
  return f;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// One CSV record; double-quoted fields may hold commas and doubled quotes.
std::vector<std::string> split_csv(std::string line, const std::string& where) {
  if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cur += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"' && trim(cur).empty()) {
      quoted = was_quoted = true;
      cur.clear();
    } else if (c == ',') {
      out.push_back(was_quoted ? cur : trim(cur));
      cur.clear();
      was_quoted = false;
    } else {
      cur += c;
    }
  }
  EMBER_CHECK(!quoted, where, ": unterminated quoted field");
  out.push_back(was_quoted ? cur : trim(cur));
  return out;
}

double to_number(const std::string& text, const std::string& where, const std::string& column, const char* expected) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  EMBER_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0 && std::isfinite(v), where, ": column '",
              column, "': expected ", expected, ", got '", text, "'");
  return v;
}

}  // namespace

ColumnMap ColumnMap::parse(const std::string& spec) {
  ColumnMap m;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t comma = spec.find(',', begin);
    std::string pair = trim(spec.substr(begin, comma - begin));
    size_t eq = pair.find('=');
    EMBER_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < pair.size(), "--columns: expected FIELD=COLUMN pairs",
                " separated by commas, got '", pair, "'");
    std::string field = trim(pair.substr(0, eq)), column = trim(pair.substr(eq + 1));
    bool known = false;
    std::string names;
    for (const Field& f : fields()) {
      known |= field == f.name;
      names += (names.empty() ? "" : ", ") + std::string(f.name);
    }
    EMBER_CHECK(known, "--columns: unknown field '", field, "': expected one of ", names);
    m.columns[field] = column;
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return m;
}

namespace {

// The header: the first line that is neither empty nor a '#' comment (none: an empty list);
// `lineno` is left at its line.
std::vector<std::string> read_header(std::istream& in, const std::string& name, int& lineno) {
  std::string line;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    return split_csv(line, name + ":" + std::to_string(lineno));
  }
  return {};
}

// Which column holds each field: --columns' mapping, else the first alias the header names; a
// required field without a column is refused naming the header line `hwhere`.
std::map<std::string, int> column_index(const std::vector<std::string>& header, const std::string& hwhere,
                                        const TraceOptions& opt) {
  std::unordered_map<std::string, int> col_of;
  for (size_t i = 0; i < header.size(); ++i) {
    EMBER_CHECK(!header[i].empty(), hwhere, ": header column ", i + 1, " has no name");
    EMBER_CHECK(!col_of.count(header[i]), hwhere, ": header names column '", header[i], "' twice");
    col_of[header[i]] = static_cast<int>(i);
  }
  std::map<std::string, int> idx;
  for (const Field& f : fields()) {
    auto mapped = opt.columns.columns.find(f.name);
    if (mapped != opt.columns.columns.end()) {
      auto it = col_of.find(mapped->second);
      EMBER_CHECK(it != col_of.end(), hwhere, ": --columns maps ", f.name, " to '", mapped->second,
                  "' but the header has no such column");
      idx[f.name] = it->second;
      continue;
    }
    for (const char* a : f.aliases)
      if (auto it = col_of.find(a); it != col_of.end()) {
        idx[f.name] = it->second;
        break;
      }
    if (f.required && !idx.count(f.name)) {
      std::string looked;
      for (const char* a : f.aliases) looked += (looked.empty() ? "" : ", ") + std::string(a);
      EMBER_FAIL(hwhere, ": no column for the job's ", f.name, " (looked for ", looked, "); name it with --columns ",
                 f.name, "=COLUMN");
    }
  }
  return idx;
}

}  // namespace

std::vector<JobSpec> parse_trace(std::istream& in, const std::string& name, const TraceOptions& opt) {
  EMBER_CHECK(opt.time_unit > 0, "trace ", name, ": time unit must be positive");
  std::string line;
  int lineno = 0;
  const std::vector<std::string> header = read_header(in, name, lineno);
  EMBER_CHECK(!header.empty(), name, ": empty file, expected a CSV header row naming the columns");
  const int header_line = lineno;
  const std::string hwhere = name + ":" + std::to_string(header_line);
  const std::map<std::string, int> idx = column_index(header, hwhere, opt);  // field -> column

  std::vector<JobSpec> jobs;
  std::unordered_map<std::string, int> id_line;
  while (std::getline(in, line)) {
    ++lineno;
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::string where = name + ":" + std::to_string(lineno);
    std::vector<std::string> cells = split_csv(line, where);
    EMBER_CHECK(cells.size() == header.size(), where, ": expected ", header.size(),
                " comma-separated fields (as in the", " header), got ", cells.size());
    auto cell = [&](const char* field) -> const std::string* {
      auto it = idx.find(field);
      return it == idx.end() ? nullptr : &cells[it->second];
    };
    auto colname = [&](const char* field) { return header[idx.at(field)]; };
    JobSpec j;
    if (const std::string* c = cell("id"); c && !c->empty()) {
      j.name = *c;
      auto [it, fresh] = id_line.emplace(j.name, lineno);
      EMBER_CHECK(fresh, where, ": job id '", j.name, "' already used on line ", it->second);
    } else {
      j.name = std::string("line").append(std::to_string(lineno));
    }
    j.submit = to_number(*cell("submit"), where, colname("submit"), "a submit time") * opt.time_unit;
    // Times beyond about 3,000 years would make the simulator's clock stop: at 1e18 s a double's
    // step is 128 s, and adding a second to the clock changes nothing.
    // A trace's clock starts at 0: a negative submit time (once accepted) is a job from before the
    // simulation began, and would be counted as waiting for time that was never simulated.
    EMBER_CHECK(j.submit >= 0 && j.submit <= kMaxTraceSeconds, where, ": column '", colname("submit"),
                "': expected a submit time in [0, ", kMaxTraceSeconds, "] s from the trace's start, got '",
                *cell("submit"), "'");
    double g = to_number(*cell("gpus"), where, colname("gpus"), "a whole number of devices");
    EMBER_CHECK(g >= 1 && g == std::floor(g) && g <= 1e6, where, ": column '", colname("gpus"),
                "': expected a whole number of devices >= 1, got '", *cell("gpus"), "'");
    j.gpus = static_cast<int>(g);
    j.duration = to_number(*cell("duration"), where, colname("duration"), "a duration") * opt.time_unit;
    EMBER_CHECK(j.duration >= 0 && j.duration <= kMaxTraceSeconds, where, ": column '", colname("duration"),
                "': expected a duration in [0, ", kMaxTraceSeconds, "] s, got '", *cell("duration"), "'");
    if (const std::string* c = cell("estimate"); c && !c->empty()) {
      j.estimate = to_number(*c, where, colname("estimate"), "an estimated duration") * opt.time_unit;
      EMBER_CHECK(j.estimate >= 0 && j.estimate <= kMaxTraceSeconds, where, ": column '", colname("estimate"),
                  "': expected an estimate in [0, ", kMaxTraceSeconds, "] s, got '", *c, "'");
    } else if (opt.exact_estimates && !idx.count("estimate")) {
      j.estimate = j.duration;
    }
    if (const std::string* c = cell("priority"); c && !c->empty()) {
      double pr = to_number(*c, where, colname("priority"), "an integer priority");
      EMBER_CHECK(pr == std::floor(pr) && std::abs(pr) < 1e9, where, ": column '", colname("priority"),
                  "': expected an integer priority, got '", *c, "'");
      j.priority = static_cast<int>(pr);
    }
    if (const std::string* c = cell("queue")) j.queue = *c;
    if (const std::string* c = cell("model")) j.model = *c;
    if (const std::string* c = cell("mem"); c && !c->empty()) {
      j.mem_per_gpu = to_number(*c, where, colname("mem"), "GiB per device");
      EMBER_CHECK(j.mem_per_gpu >= 0, where, ": column '", colname("mem"), "': expected GiB >= 0, got '", *c, "'");
    }
    jobs.push_back(std::move(j));
  }
  EMBER_CHECK(!jobs.empty(), name, ": no jobs after the header on line ", header_line);
  std::stable_sort(jobs.begin(), jobs.end(), [](const JobSpec& a, const JobSpec& b) { return a.submit < b.submit; });
  return jobs;
}

std::vector<JobSpec> read_trace(const std::string& path, const TraceOptions& opt) {
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), "trace ", path, ": is a folder, expected a CSV file");
  std::ifstream in(path);
  EMBER_CHECK(in, "trace ", path, ": cannot open (", std::strerror(errno), ")");
  return parse_trace(in, path, opt);
}

}  // namespace ember::sched
