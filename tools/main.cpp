// `ember`: the command-line front end. Subcommands live in tables (tools/command.h).
#include <string>
#include <vector>

#include "tools/command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return ember::tools::dispatch("ember", ember::tools::top_level_commands(), args);
}
