// How a leaf command ends: its exit status 0 on success, 1 on a failure (ember::Error: a bad
// file, an impossible job), 2 on a usage mistake (UsageError: the message and the usage on stderr).
// Apart from the command tables (command.h) so that the bench programs with flags end the same way,
// compiling this file and tools/flags.cpp in.
#pragma once

#include <functional>
#include <string>

namespace ember::tools {

class Flags;

// Runs a leaf command's body, turning UsageError into status 2 (message + usage) and
// ember::Error into status 1.
int run_leaf(const std::string& prog, const std::string& usage, const std::function<int()>& body);

// "usage: SYNOPSIS", a blank line, then "flags:" and one line per flag; text after the flags is
// the caller's to append.
std::string usage_of(const std::string& synopsis, const Flags& f);
// Whether --help was given; if so the usage has been printed on stdout.
bool help_asked(const Flags& f, const std::string& usage);

}  // namespace ember::tools
