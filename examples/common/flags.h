// A small command-line flag parser for the examples: --name=value or --name value, --help, and a
// clear message plus exit status 2 for an unknown flag or a malformed value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::examples {

class Flags {
 public:
  Flags(int argc, char** argv, std::string description) : description_(std::move(description)) {
    program_ = argc > 0 ? argv[0] : "program";
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        help_ = true;
        continue;
      }
      if (a.rfind("--", 0) != 0) fail("unexpected argument '" + a + "'");
      a = a.substr(2);
      auto eq = a.find('=');
      if (eq != std::string::npos) {
        given_[a.substr(0, eq)] = a.substr(eq + 1);
      } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
        given_[a] = argv[++i];
      } else {
        given_[a] = "true";  // a bare boolean flag
      }
    }
  }

  std::string str(const std::string& name, const std::string& def, const std::string& help) {
    declare(name, def, help);
    auto it = given_.find(name);
    return it == given_.end() ? def : it->second;
  }
  long long integer(const std::string& name, long long def, const std::string& help) {
    std::string v = str(name, std::to_string(def), help);
    try {
      size_t pos = 0;
      long long r = std::stoll(v, &pos);
      if (pos == v.size()) return r;
    } catch (const std::exception&) {
    }
    fail("--" + name + " expects an integer, got '" + v + "'");
  }
  // An integer flag that must lie in [lo, hi] (a thread count, say, where a typo would otherwise
  // start 100,000 threads).
  long long integer_in(const std::string& name, long long def, long long lo, long long hi, const std::string& help) {
    const long long r = integer(name, def, help);
    if (r < lo || r > hi)
      fail("--" + name + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
           std::to_string(r));
    return r;
  }
  double real(const std::string& name, double def, const std::string& help) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", def);
    std::string v = str(name, buf, help);
    double r = 0;
    if (!parse_finite(v, r)) fail("--" + name + " expects a finite number, got '" + v + "'");
    return r;
  }
  // A comma-separated list of finite numbers ("1,2.5"); empty when the flag is absent. Each item
  // must parse in full: "2x" or "a" is refused, not read as 2 or thrown as std::invalid_argument.
  std::vector<double> reals(const std::string& name, const std::string& help) {
    const std::string v = str(name, "", help);
    std::vector<double> out;
    if (v.empty()) return out;
    for (size_t at = 0; at <= v.size();) {
      const size_t comma = std::min(v.find(',', at), v.size());
      double r = 0;
      if (!parse_finite(v.substr(at, comma - at), r))
        fail("--" + name + " expects comma-separated numbers (e.g. 1,2), got '" + v + "'");
      out.push_back(r);
      at = comma + 1;
    }
    return out;
  }
  bool boolean(const std::string& name, bool def, const std::string& help) {
    std::string v = str(name, def ? "true" : "false", help);
    if (v == "true" || v == "1" || v == "yes") return true;
    if (v == "false" || v == "0" || v == "no") return false;
    fail("--" + name + " expects true or false, got '" + v + "'");
  }

  // Call after declaring every flag: prints help and exits 0 for --help; exits 2 on unknown flags.
  void finish() {
    if (help_) {
      std::printf("%s\n\n%s\n\nFlags:\n%s", program_.c_str(), description_.c_str(), usage().c_str());
      std::exit(0);
    }
    for (auto& [k, v] : given_)
      if (!declared_.count(k)) fail("unknown flag --" + k);
  }

  [[noreturn]] void fail(const std::string& msg) const {
    std::fprintf(stderr, "%s: %s\n\nFlags:\n%s", program_.c_str(), msg.c_str(), usage().c_str());
    std::exit(2);
  }

 private:
  // The whole of `text` as one finite number.
  static bool parse_finite(const std::string& text, double& out) {
    try {
      size_t pos = 0;
      out = std::stod(text, &pos);
      return pos == text.size() && std::isfinite(out);
    } catch (const std::exception&) {
      return false;
    }
  }
  void declare(const std::string& name, const std::string& def, const std::string& help) {
    if (!declared_.count(name)) order_.push_back(name);
    declared_[name] = {def, help};
  }
  std::string usage() const {
    std::string s;
    for (const auto& n : order_) {
      const auto& [def, help] = declared_.at(n);
      s += "  --" + n + std::string(n.size() < 18 ? 18 - n.size() : 1, ' ') + help + " (default: " + def + ")\n";
    }
    s += "  --help              show this message\n";
    return s;
  }

  std::string program_, description_;
  std::map<std::string, std::string> given_;
  std::map<std::string, std::pair<std::string, std::string>> declared_;
  std::vector<std::string> order_;
  bool help_ = false;
};

}  // namespace ember::examples
