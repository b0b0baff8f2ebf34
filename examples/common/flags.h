// A small command-line flag parser for the examples: --name=value or --name value, --help, and a
// clear message plus exit status 2 for every usage error (an unknown flag, a missing or malformed
// value, a value out of range), always followed by the whole flag list.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::examples {

inline constexpr int kUsageExit = 2;  // every usage error, as with getopt-style tools

// How main's catch ends a run that failed for any other reason (bad data, a checkpoint that does
// not fit, a folder that cannot be written): "WHO: message" on stderr, without the flag list, which
// is for usage errors only, and exit status 1. stdout is flushed first: with both in one file or
// pipe, the buffered "Training ..." line once came out after the error it preceded.
inline int report_failure(const std::string& who, const std::exception& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n", who.c_str(), e.what());
  return 1;
}

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

  std::string str(const std::string& name, const std::string& def, const std::string& help) {
    declare(name, def, help);
    auto it = given_.find(name);
    if (it == given_.end()) return def;
    if (bare_.count(name)) {
      error("--" + name + " needs a value");
      return def;
    }
    return it->second;
  }
  // Whether the flag was on the command line (a default and an explicit value can mean different
  // things: --data falls back to Fashion-MNIST only when it was not given).
  bool given(const std::string& name) const { return given_.count(name) != 0; }

  long long integer(const std::string& name, long long def, const std::string& help) {
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
  // An integer flag that must lie in [lo, hi] (a thread count, say, where a typo would otherwise
  // start 100,000 threads).
  long long integer_in(const std::string& name, long long def, long long lo, long long hi, const std::string& help) {
    const long long r = integer(name, def, help);
    if (r < lo || r > hi) {
      error("--" + name + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
            std::to_string(r));
      return def;
    }
    return r;
  }
  // An integer flag that must be at least `lo` (--epochs, --batch-size: 1).
  long long integer_min(const std::string& name, long long def, long long lo, const std::string& help) {
    const long long r = integer(name, def, help);
    if (r < lo) {
      error("--" + name + " expects an integer >= " + std::to_string(lo) + ", got " + std::to_string(r));
      return def;
    }
    return r;
  }
  // A count where -1 means "no limit" (--limit, --max-steps): -1 or an integer >= lo, nothing else
  // (a -5 once meant "no limit" and a 0 limit trained on nothing with status 0). `none` says what
  // -1 means in the help and the message.
  long long count_or_none(const std::string& name, long long lo, const std::string& none, const std::string& help) {
    const long long r = integer(name, -1, help + " (-1: " + none + ")");
    if (r != -1 && r < lo) {
      error("--" + name + " expects -1 (" + none + ") or an integer >= " + std::to_string(lo) + ", got " +
            std::to_string(r));
      return -1;
    }
    return r;
  }
  double real(const std::string& name, double def, const std::string& help) {
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
  // A number that must be > 0 (a learning rate).
  double positive(const std::string& name, double def, const std::string& help) {
    const double r = real(name, def, help);
    if (!(r > 0)) {
      error("--" + name + " expects a number > 0, got " + shortest(r));
      return def;
    }
    return r;
  }
  // A number strictly between lo and hi (a held-out fraction: 0 and 1 leave one side empty).
  double real_between(const std::string& name, double def, double lo, double hi, const std::string& help) {
    const double r = real(name, def, help);
    if (!(r > lo && r < hi)) {
      error("--" + name + " expects a number in (" + shortest(lo) + ", " + shortest(hi) + "), got " + shortest(r));
      return def;
    }
    return r;
  }
  // A device: auto, cpu, cuda or cuda:N (checked here, so that a typo is a usage error with the
  // flag list, not a failure once the program runs).
  std::string device(const std::string& name, const std::string& def, const std::string& help) {
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
  // A comma-separated list of finite numbers ("1,2.5"); empty when the flag is absent. Each item
  // must parse in full: "2x" or "a" is refused, not read as 2 or thrown as std::invalid_argument.
  std::vector<double> reals(const std::string& name, const std::string& help) {
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
  bool boolean(const std::string& name, bool def, const std::string& help) {
    declare(name, def ? "true" : "false", help);
    auto it = given_.find(name);
    if (it == given_.end()) return def;
    const std::string& v = it->second;  // a bare --name is "true"
    if (v == "true" || v == "1" || v == "yes") return true;
    if (v == "false" || v == "0" || v == "no") return false;
    error("--" + name + " expects true or false, got '" + v + "'");
    return def;
  }

  // Call after declaring every flag: prints help and exits 0 for --help; exits 2 on the first
  // usage error met while declaring (reported only now, so that the flag list is complete) or on
  // an unknown flag.
  void finish() {
    finished_ = true;
    if (help_) {
      std::printf("%s\n\n%s\n\nFlags:\n%s", program_.c_str(), description_.c_str(), usage().c_str());
      std::exit(0);
    }
    if (!pending_.empty()) fail(pending_);
    for (auto& [k, v] : given_)
      if (!declared_.count(k)) fail("unknown flag --" + k);
  }

  [[noreturn]] void fail(const std::string& msg) const {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n\nFlags:\n%s", program_.c_str(), msg.c_str(), usage().c_str());
    std::exit(kUsageExit);
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
  static std::string shortest(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  // Before finish() the first error waits there, so that the message is followed by every flag
  // (failing at once would list only the flags declared so far); after it, it is reported at once.
  void error(const std::string& msg) {
    if (finished_) fail(msg);
    if (pending_.empty()) pending_ = msg;
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

  std::string program_, description_, pending_;
  std::map<std::string, std::string> given_;
  std::set<std::string> bare_;
  std::map<std::string, std::pair<std::string, std::string>> declared_;
  std::vector<std::string> order_;
  bool help_ = false, finished_ = false;
};

}  // namespace ember::examples
