// A small command-line flag parser for the training programs (the examples and `ember train`):
// --name=value or --name value, --help, and a clear message plus exit status 2 for every usage
// error (an unknown flag, a missing or malformed value, a value out of range), always followed by
// the whole flag list.
#pragma once

#include <exception>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ember::train {

inline constexpr int kUsageExit = 2;  // every usage error, as with getopt-style tools

// How main's catch ends a run that failed for any other reason (bad data, a checkpoint that does
// not fit, a folder that cannot be written): "WHO: message" on stderr, without the flag list, which
// is for usage errors only, and exit status 1. stdout is flushed first: with both in one file or
// pipe, the buffered "Training ..." line once came out after the error it preceded.
int report_failure(const std::string& who, const std::exception& e);

class Flags {
 public:
  Flags(int argc, char** argv, std::string description);

  std::string str(const std::string& name, const std::string& def, const std::string& help);
  // Whether the flag was on the command line (a default and an explicit value can mean different
  // things: --data falls back to Fashion-MNIST only when it was not given).
  bool given(const std::string& name) const { return given_.count(name) != 0; }

  long long integer(const std::string& name, long long def, const std::string& help);
  // An integer flag that must lie in [lo, hi] (a thread count, say, where a typo would otherwise
  // start 100,000 threads).
  long long integer_in(const std::string& name, long long def, long long lo, long long hi, const std::string& help);
  // An integer flag that must be at least `lo` (--epochs, --batch-size: 1).
  long long integer_min(const std::string& name, long long def, long long lo, const std::string& help);
  // A count where -1 means "no limit" (--limit, --max-steps): -1 or an integer >= lo, nothing else
  // (a -5 once meant "no limit" and a 0 limit trained on nothing with status 0). `none` says what
  // -1 means in the help and the message.
  long long count_or_none(const std::string& name, long long lo, const std::string& none, const std::string& help);
  double real(const std::string& name, double def, const std::string& help);
  // A number that must be > 0 (a learning rate).
  double positive(const std::string& name, double def, const std::string& help);
  // A number strictly between lo and hi (a held-out fraction: 0 and 1 leave one side empty).
  double real_between(const std::string& name, double def, double lo, double hi, const std::string& help);
  // A device: auto, cpu, cuda or cuda:N (checked here, so that a typo is a usage error with the
  // flag list, not a failure once the program runs).
  std::string device(const std::string& name, const std::string& def, const std::string& help);
  // A comma-separated list of finite numbers ("1,2.5"); empty when the flag is absent. Each item
  // must parse in full: "2x" or "a" is refused, not read as 2 or thrown as std::invalid_argument.
  std::vector<double> reals(const std::string& name, const std::string& help);
  bool boolean(const std::string& name, bool def, const std::string& help);

  // Call after declaring every flag: prints help and exits 0 for --help; exits 2 on the first
  // usage error met while declaring (reported only now, so that the flag list is complete) or on
  // an unknown flag.
  void finish();

  [[noreturn]] void fail(const std::string& msg) const;

 private:
  // Before finish() the first error waits there, so that the message is followed by every flag
  // (failing at once would list only the flags declared so far); after it, it is reported at once.
  void error(const std::string& msg);
  void declare(const std::string& name, const std::string& def, const std::string& help);
  std::string usage() const;

  std::string program_, description_, pending_;
  std::map<std::string, std::string> given_;
  std::set<std::string> bare_;
  std::map<std::string, std::pair<std::string, std::string>> declared_;
  std::vector<std::string> order_;
  bool help_ = false, finished_ = false;
};

}  // namespace ember::train
