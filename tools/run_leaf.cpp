#include "tools/run_leaf.h"

#include <cstdio>
#include <iostream>

#include "tools/flags.h"

namespace ember::tools {

int run_leaf(const std::string& prog, const std::string& usage, const std::function<int()>& body) {
  // What the command printed before failing comes out before the error (both may go to one file).
  auto flush_output = [] {
    std::cout.flush();
    std::fflush(stdout);
  };
  try {
    return body();
  } catch (const UsageError& e) {
    flush_output();
    std::cerr << prog << ": " << e.what() << "\n\n" << usage;
    return 2;
  } catch (const std::exception& e) {  // ember::Error, or a file-system error the command did not foresee
    flush_output();
    std::cerr << prog << ": error: " << e.what() << "\n";
    return 1;
  }
}

std::string usage_of(const std::string& synopsis, const Flags& f) {
  return "usage: " + synopsis + "\n\nflags:\n" + f.help();
}

bool help_asked(const Flags& f, const std::string& usage) {
  if (!f.has("help")) return false;
  std::cout << usage;
  return true;
}

}  // namespace ember::tools
