#include "tools/run_leaf.h"

#include <iostream>

#include "core/error.h"
#include "tools/flags.h"

namespace ember::cli {

int run_leaf(const std::string& prog, const std::string& usage, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << prog << ": " << e.what() << "\n\n" << usage;
    return 2;
  } catch (const ember::Error& e) {
    std::cerr << prog << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // a file-system error the command did not foresee, say
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

}  // namespace ember::cli
