// The command line of a bench program that takes named flags, through the `ember` program's own
// parser (tools/flags.h; the program compiles tools/flags.cpp in): a malformed or unknown flag is
// a UsageError naming it, reported with the usage, as `ember`'s subcommands report it.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tools/flags.h"

namespace ember::bench {

// Parses argv into `f` (its flags declared, "help" among them) and then through parse(f) into
// `out`. Returns the exit status when the program should stop here: 0 after --help (usage
// printed), 2 after a usage error (message and usage on stderr); nullopt to go on.
template <typename Args, typename Parse>
std::optional<int> parse_flags(cli::Flags& f, int argc, char** argv, const char* program, const std::string& synopsis,
                               Args& out, const Parse& parse) {
  const std::string usage = "usage: " + std::string(program) + " " + synopsis + "\n\nflags:\n" + f.help();
  try {
    f.parse(std::vector<std::string>(argv + 1, argv + argc));
    if (f.has("help")) {
      std::printf("%s", usage.c_str());
      return 0;
    }
    out = parse(f);
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", program, e.what(), usage.c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace ember::bench
