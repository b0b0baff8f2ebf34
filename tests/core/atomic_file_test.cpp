// Atomic file writes: the target appears complete or not at all, and no temporary is left behind.
#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {
fs::path scratch() {
  fs::path p = fs::temp_directory_path() / ("ember_atomic_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
}  // namespace

TEST(AtomicFile, WritesAndReplaces) {
  fs::path d = scratch();
  write_file_atomic((d / "f").string(), [](std::FILE* f) { write_all(f, "first", 5, "f"); });
  EXPECT_EQ(slurp(d / "f"), "first");
  write_file_atomic((d / "f").string(), [](std::FILE* f) { write_all(f, "second", 6, "f"); });
  EXPECT_EQ(slurp(d / "f"), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
  fs::remove_all(d);
}

TEST(AtomicFile, FailedWriteLeavesOldFileAndNoTemporary) {
  fs::path d = scratch();
  write_file_atomic((d / "f").string(), [](std::FILE* f) { write_all(f, "good", 4, "f"); });
  EXPECT_THROW(write_file_atomic((d / "f").string(),
                                 [](std::FILE* f) {
                                   write_all(f, "partial", 7, "f");
                                   throw Error("writer failed halfway");
                                 }),
               Error);
  EXPECT_EQ(slurp(d / "f"), "good");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
  EXPECT_THROW(write_file_atomic((d / "missing_dir" / "f").string(), [](std::FILE*) {}), Error);
  fs::remove_all(d);
}

// What is not a regular file is never replaced: renaming over a device as root (the fuzzing pass
// did it to /dev/full) turned it into a regular file. Pipes and folders are refused the same way.
TEST(AtomicFile, OnlyARegularFileIsReplaced) {
  fs::path d = scratch();
  fs::create_directories(d / "folder");
  ASSERT_EQ(::mkfifo((d / "pipe").c_str(), 0600), 0);
  for (const fs::path& target : {d / "pipe", d / "folder"}) {
    try {
      write_file_atomic(target.string(), [](std::FILE* f) { write_all(f, "x", 1, "x"); });
      ADD_FAILURE() << "wrote over " << target;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exists and is not a regular file"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(d / "pipe"));
  EXPECT_TRUE(fs::is_directory(d / "folder"));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 2);  // no temporary left
  fs::remove_all(d);
}
