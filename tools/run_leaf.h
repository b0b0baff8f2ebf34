// How a leaf command ends: its exit status 0 on success, 1 on a failure (ember::Error: a bad
// file, an impossible job), 2 on a usage mistake (UsageError: the message and the usage on stderr).
// Apart from the command tables (command.h) so that the bench programs with flags end the same way,
// compiling this file and tools/flags.cpp in.
#pragma once

#include <functional>
#include <string>

namespace ember::cli {

// Runs a leaf command's body, turning UsageError into status 2 (message + usage) and
// ember::Error into status 1.
int run_leaf(const std::string& prog, const std::string& usage, const std::function<int()>& body);

}  // namespace ember::cli
