// Every file a user names for Ember to read (a model file, a checkpoint, a CSV table) is opened
// here, so that a path that is missing, a folder or unreadable is an ember::Error that names it and
// what was expected, never a stream exception from the C++ library (`ember train DIRECTORY` once
// aborted in std::__ios_failure) or a vaguer message of its own.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

namespace ember {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using InputFile = std::unique_ptr<std::FILE, FileCloser>;

// `path` opened for reading (binary). `what` says what the file should be, for the messages:
// "PATH: does not exist (expected WHAT)", "PATH: is a folder (expected WHAT)", "PATH: cannot be
// read: Permission denied (expected WHAT)". Pipes and devices open as files do (/dev/stdin).
InputFile open_input_file(const std::string& path, const std::string& what);

// The whole content of `path`, opened as open_input_file does; a read that fails midway is an
// ember::Error too.
std::string read_input_file(const std::string& path, const std::string& what);

}  // namespace ember
