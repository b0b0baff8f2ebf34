#include "train/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace ember::train {
namespace {

// The whole of `text` as one finite number.
bool parse_finite(const std::string& text, double& out) {
  try {
    size_t pos = 0;
    out = std::stod(text, &pos);
    return pos == text.size() && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

int report_failure(const std::string& who, const std::exception& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n", who.c_str(), e.what());
  return 1;
}

Flags::Flags(int argc, char** argv, std::string description) : description_(std::move(description)) {
  program_ = argc > 0 ? argv[0] : "program";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      error("unexpected argument '" + a + "'");
      continue;
    }
    a = a.substr(2);
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      given_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      given_[a] = argv[++i];
    } else {
      // A bare flag: true for a boolean; for any other flag its value is missing (which must
      // not read as "got 'true'").
      given_[a] = "true";
      bare_.insert(a);
    }
  }
}

std::string Flags::str(const std::string& name, const std::string& def, const std::string& help) {
  declare(name, def, help);
  auto it = given_.find(name);
  if (it == given_.end()) return def;
  if (bare_.count(name)) {
    error("--" + name + " needs a value");
    return def;
  }
  return it->second;
}

long long Flags::integer(const std::string& name, long long def, const std::string& help) {
  std::string v = str(name, std::to_string(def), help);
  try {
    size_t pos = 0;
    long long r = std::stoll(v, &pos);
    if (pos == v.size()) return r;
  } catch (const std::exception&) {
  }
  error("--" + name + " expects an integer, got '" + v + "'");
  return def;
}

long long Flags::integer_in(const std::string& name, long long def, long long lo, long long hi,
                            const std::string& help) {
  const long long r = integer(name, def, help);
  if (r < lo || r > hi) {
    error("--" + name + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
          std::to_string(r));
    return def;
  }
  return r;
}

long long Flags::integer_min(const std::string& name, long long def, long long lo, const std::string& help) {
  const long long r = integer(name, def, help);
  if (r < lo) {
    error("--" + name + " expects an integer >= " + std::to_string(lo) + ", got " + std::to_string(r));
    return def;
  }
  return r;
}

long long Flags::count_or_none(const std::string& name, long long lo, const std::string& none,
                               const std::string& help) {
  const long long r = integer(name, -1, help + " (-1: " + none + ")");
  if (r != -1 && r < lo) {
    error("--" + name + " expects -1 (" + none + ") or an integer >= " + std::to_string(lo) + ", got " +
          std::to_string(r));
    return -1;
  }
  return r;
}

double Flags::real(const std::string& name, double def, const std::string& help) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", def);
  std::string v = str(name, buf, help);
  double r = 0;
  if (!parse_finite(v, r)) {
    error("--" + name + " expects a finite number, got '" + v + "'");
    return def;
  }
  return r;
}

double Flags::positive(const std::string& name, double def, const std::string& help) {
  const double r = real(name, def, help);
  if (!(r > 0)) {
    error("--" + name + " expects a number > 0, got " + shortest(r));
    return def;
  }
  return r;
}

double Flags::real_between(const std::string& name, double def, double lo, double hi, const std::string& help) {
  const double r = real(name, def, help);
  if (!(r > lo && r < hi)) {
    error("--" + name + " expects a number in (" + shortest(lo) + ", " + shortest(hi) + "), got " + shortest(r));
    return def;
  }
  return r;
}

std::string Flags::device(const std::string& name, const std::string& def, const std::string& help) {
  const std::string v = str(name, def, help);
  bool ok = v == "auto" || v == "cpu" || v == "cuda";
  if (!ok && v.rfind("cuda:", 0) == 0 && v.size() > 5 && v.size() <= 9)
    ok = std::all_of(v.begin() + 5, v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!ok) {
    error("--" + name + " expects auto, cpu, cuda or cuda:N, got '" + v + "'");
    return def;
  }
  return v;
}

std::vector<double> Flags::reals(const std::string& name, const std::string& help) {
  const std::string v = str(name, "", help);
  std::vector<double> out;
  if (v.empty()) return out;
  for (size_t at = 0; at <= v.size();) {
    const size_t comma = std::min(v.find(',', at), v.size());
    double r = 0;
    if (!parse_finite(v.substr(at, comma - at), r)) {
      error("--" + name + " expects comma-separated numbers (e.g. 1,2), got '" + v + "'");
      return {};
    }
    out.push_back(r);
    at = comma + 1;
  }
  return out;
}

bool Flags::boolean(const std::string& name, bool def, const std::string& help) {
  declare(name, def ? "true" : "false", help);
  auto it = given_.find(name);
  if (it == given_.end()) return def;
  const std::string& v = it->second;  // a bare --name is "true"
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  error("--" + name + " expects true or false, got '" + v + "'");
  return def;
}

void Flags::finish() {
  finished_ = true;
  if (help_) {
    std::printf("%s\n\n%s\n\nFlags:\n%s", program_.c_str(), description_.c_str(), usage().c_str());
    std::exit(0);
  }
  if (!pending_.empty()) fail(pending_);
  for (auto& [k, v] : given_)
    if (!declared_.count(k)) fail("unknown flag --" + k);
}

void Flags::fail(const std::string& msg) const {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n\nFlags:\n%s", program_.c_str(), msg.c_str(), usage().c_str());
  std::exit(kUsageExit);
}

void Flags::error(const std::string& msg) {
  if (finished_) fail(msg);
  if (pending_.empty()) pending_ = msg;
}

void Flags::declare(const std::string& name, const std::string& def, const std::string& help) {
  if (!declared_.count(name)) order_.push_back(name);
  declared_[name] = {def, help};
}

std::string Flags::usage() const {
  std::string s;
  for (const auto& n : order_) {
    const auto& [def, help] = declared_.at(n);
    s += "  --" + n + std::string(n.size() < 18 ? 18 - n.size() : 1, ' ') + help + " (default: " + def + ")\n";
  }
  s += "  --help              show this message\n";
  return s;
}

}  // namespace ember::train
