// Command-line flags for the `ember` subcommands: `--name value`, `--name=value` and boolean
// `--name`, declared up front so that an unknown or malformed flag is a UsageError (the program
// prints the message and the usage, and exits with status 2) rather than a silent default.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::tools {

class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& msg) : std::runtime_error(msg) {}
};

// "a,b,,c" -> {"a", "b", "", "c"}; "" -> {""} (the callers say what an empty item means).
std::vector<std::string> split_commas(const std::string& s);

class Flags {
 public:
  // `value_name` empty: a boolean switch. `repeatable`: may be given more than once. A one-letter
  // name is spelled `-n` as well as `--n`, and listed as `-n`.
  Flags& add(const std::string& name, const std::string& value_name, const std::string& help, bool repeatable = false);
  // A flag the program passes to itself (a wrapper's private switches): parsed like any other,
  // left out of help().
  Flags& add_internal(const std::string& name, const std::string& value_name);
  // Parses args (without the program/subcommand names); positional arguments are refused.
  void parse(const std::vector<std::string>& args);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string str(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> all(const std::string& name) const;
  double number(const std::string& name, double def, double lo, double hi) const;
  long integer(const std::string& name, long def, long lo, long hi) const;
  // A comma-separated list of integers.
  std::vector<long> integers(const std::string& name, long lo, long hi) const;
  std::string require(const std::string& name) const;

  std::string help() const;  // one line per flag

 private:
  struct Spec {
    std::string value_name, help;
    bool repeatable;
    bool internal = false;
  };
  std::vector<std::string> order_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace ember::tools
