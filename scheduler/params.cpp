#include "scheduler/params.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace ember::sched {
namespace {

double parse_number(const std::string& what, const std::string& text, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  EMBER_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0 && std::isfinite(v), "--set ", what,
              ": expected a number, got '", text, "'");
  EMBER_CHECK(v >= lo && v <= hi, "--set ", what, ": expected a value in [", lo, ", ", hi, "], got ", v);
  return v;
}

}  // namespace

const std::string* ParamReader::find(const std::string& key) {
  std::string full = policy_ + "." + key;
  used_.insert(full);
  auto it = params_.find(full);
  return it == params_.end() ? nullptr : &it->second;
}

double ParamReader::number(const std::string& key, double def, double lo, double hi) {
  const std::string* v = find(key);
  return v ? parse_number(policy_ + "." + key, *v, lo, hi) : def;
}

std::vector<double> ParamReader::numbers(const std::string& key, std::vector<double> def, double lo, double hi) {
  const std::string* v = find(key);
  if (!v) return def;
  std::vector<double> out;
  size_t begin = 0;
  while (true) {
    size_t comma = v->find(',', begin);
    out.push_back(parse_number(policy_ + "." + key, v->substr(begin, comma - begin), lo, hi));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return out;
}

void ParamReader::finish() const {
  std::string prefix = policy_ + ".";
  for (const auto& [k, v] : params_)
    if (k.compare(0, prefix.size(), prefix) == 0 && !used_.count(k))
      EMBER_FAIL("--set ", k, ": policy '", policy_, "' has no parameter '", k.substr(prefix.size()), "'");
}

}  // namespace ember::sched
