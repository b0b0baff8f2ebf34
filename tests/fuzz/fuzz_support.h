// What the fuzz targets share. Each target is one LLVMFuzzerTestOneInput (libFuzzer's entry
// point): under `EMBER_FUZZ=ON` (clang) libFuzzer drives it; in every other build replay_main.cpp
// runs it over the seed corpus in tests/fuzz/corpus/TARGET, so that every input that ever found a
// bug stays a regression test in the ordinary test run too.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"

namespace fuzz {

// Bad input must be answered with an ember::Error; any other exception escaping the reader is a
// finding (as is a crash, a sanitizer report, a hang or runaway memory, which libFuzzer catches
// itself), so it aborts and the fuzzer keeps the input.
template <typename F>
void errors_only(F&& f) {
  try {
    f();
  } catch (const ember::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception other than ember::Error escaped: %s\n", e.what());
    std::abort();
  }
}

// A file holding `data` (the readers under test take paths, as users call them), rewritten for
// each input: in /dev/shm when there is one, so that it costs no disk writes.
inline std::string& scratch_path() {
  static std::string path;
  return path;
}

// A target that crashed (a finding: libFuzzer ends it with _Exit, so atexit never runs) leaves
// its scratch file behind; the next run removes the files of processes that no longer exist.
inline void remove_stale_scratch_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = "ember-fuzz-";
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

inline const std::string& scratch_file(const uint8_t* data, size_t size, const char* suffix) {
  std::string& path = scratch_path();
  if (path.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp && *tmp ? tmp : "/tmp");
    remove_stale_scratch_files(dir);
    path = dir + "/ember-fuzz-" + std::to_string(::getpid()) + suffix;
    std::atexit([] { ::unlink(scratch_path().c_str()); });
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t off = 0;
  while (off < size) {
    ssize_t w = ::write(fd, data + off, size - off);
    if (w <= 0) std::abort();
    off += static_cast<size_t>(w);
  }
  ::close(fd);
  return path;
}

}  // namespace fuzz
