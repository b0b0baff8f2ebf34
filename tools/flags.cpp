#include "tools/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace ember::tools {
namespace {
// How a flag is written in messages: -n, --name.
std::string spelled(const std::string& name) {
  return (name.size() == 1 ? "-" : "--") + name;
}

double parse_double(const std::string& flag, const std::string& text, double lo, double hi, bool whole) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  bool ok = !text.empty() && end == text.c_str() + text.size() && errno == 0 && std::isfinite(v);
  if (ok && whole) ok = v == std::floor(v);
  std::ostringstream range;
  range.precision(15);  // [1, 1048576], not [1, 1.04858e+06]
  range << "[" << lo << ", " << hi << "]";
  if (!ok)
    throw UsageError(spelled(flag) + ": expected " + (whole ? "a whole number" : "a number") + " in " + range.str() +
                     ", got '" + text + "'");
  if (v < lo || v > hi)
    throw UsageError(spelled(flag) + ": expected a value in " + range.str() + ", got '" + text + "'");
  return v;
}
}  // namespace

Flags& Flags::add(const std::string& name, const std::string& value_name, const std::string& help, bool repeatable) {
  order_.push_back(name);
  specs_[name] = {value_name, help, repeatable};
  return *this;
}

Flags& Flags::add_internal(const std::string& name, const std::string& value_name) {
  add(name, value_name, "");
  specs_[name].internal = true;
  return *this;
}

void Flags::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // "-n 4": the one-letter flags' customary spelling.
    const bool short_form = a.size() == 2 && a[0] == '-' && a[1] != '-' && specs_.count(a.substr(1));
    if (!short_form && (a.size() < 3 || a.compare(0, 2, "--") != 0))
      throw UsageError("unexpected argument '" + a + "'");
    std::string name = a.substr(short_form ? 1 : 2), value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) throw UsageError("unknown flag --" + name);
    const Spec& s = it->second;
    if (s.value_name.empty()) {
      if (inline_value) throw UsageError(spelled(name) + " takes no value");
    } else if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(spelled(name) + " needs a value (" + s.value_name + ")");
      value = args[++i];
    }
    if (values_.count(name) && !s.repeatable) throw UsageError(spelled(name) + " given twice");
    values_[name].push_back(value);
  }
}

std::string Flags::str(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second.back();
}

std::vector<std::string> Flags::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Flags::require(const std::string& name) const {
  if (!has(name)) throw UsageError(spelled(name) + " is required");
  return str(name);
}

double Flags::number(const std::string& name, double def, double lo, double hi) const {
  return has(name) ? parse_double(name, str(name), lo, hi, false) : def;
}

long Flags::integer(const std::string& name, long def, long lo, long hi) const {
  return has(name) ? static_cast<long>(parse_double(name, str(name), lo, hi, true)) : def;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    size_t comma = s.find(',', begin);
    out.push_back(s.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return out;
}

std::vector<long> Flags::integers(const std::string& name, long lo, long hi) const {
  std::vector<long> out;
  for (const std::string& item : split_commas(str(name)))
    out.push_back(static_cast<long>(parse_double(name, item, lo, hi, true)));
  return out;
}

std::string Flags::help() const {
  std::ostringstream o;
  for (const std::string& n : order_) {
    const Spec& s = specs_.at(n);
    if (s.internal) continue;
    std::string lhs = (n.size() == 1 ? "  -" : "  --") + n + (s.value_name.empty() ? "" : " " + s.value_name);
    o << lhs << std::string(lhs.size() < 26 ? 26 - lhs.size() : 1, ' ') << s.help << "\n";
  }
  return o.str();
}

}  // namespace ember::tools
