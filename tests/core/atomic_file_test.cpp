// Atomic file writes: the target appears complete or not at all, and no temporary is left behind.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

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
// did it to /dev/full) turned it into a regular file. A folder, a socket and (as root, on a node
// the test makes) a block device are refused and left as they were.
TEST(AtomicFile, FoldersSocketsAndBlockDevicesAreRefused) {
  fs::path d = scratch();
  fs::create_directories(d / "folder");
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sock_path = (d / "sock").string();
  ASSERT_LT(sock_path.size(), sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::vector<std::pair<fs::path, std::string>> targets = {{d / "folder", "is a folder"}, {d / "sock", "is a socket"}};
  if (::geteuid() == 0 && ::mknod((d / "disk").c_str(), S_IFBLK | 0600, ::makedev(7, 0)) == 0)
    targets.emplace_back(d / "disk", "is a block device");
  for (const auto& [target, says] : targets) {
    try {
      write_file_atomic(target.string(), "x");
      ADD_FAILURE() << "wrote over " << target;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
  ::close(sock);
  EXPECT_TRUE(fs::is_directory(d / "folder"));
  EXPECT_TRUE(fs::is_socket(d / "sock"));
  if (targets.size() == 3) EXPECT_TRUE(fs::is_block_file(d / "disk"));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), long(targets.size()));  // no temporary
  fs::remove_all(d);
}

// A pipe gets the data written into it (`--out /dev/stdout | jq`, a shell's >(...)); one that no
// process reads is an error at once, not a writer blocked forever.
TEST(AtomicFile, APipeIsWrittenIntoAndOneNobodyReadsIsAnError) {
  fs::path d = scratch();
  const std::string pipe = (d / "pipe").string();
  ASSERT_EQ(::mkfifo(pipe.c_str(), 0600), 0);
  try {
    write_file_atomic(pipe, "x");
    ADD_FAILURE() << "wrote into a pipe nobody reads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no process is reading"), std::string::npos) << e.what();
  }
  int reader = ::open(pipe.c_str(), O_RDONLY | O_NONBLOCK);  // a reader first, so the write finds one
  ASSERT_GE(reader, 0);
  write_file_atomic(pipe, "through the pipe");
  char buf[64] = {};
  ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, n > 0 ? size_t(n) : 0), "through the pipe");
  EXPECT_TRUE(fs::is_fifo(pipe));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
  fs::remove_all(d);
}

// A character device is written into, never replaced: /dev/null takes the data, /dev/full refuses
// it with an error; as root, a device node the test makes stays a device node.
TEST(AtomicFile, ACharacterDeviceIsWrittenIntoNotReplaced) {
  write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  std::vector<std::string> full = {"/dev/full"};
  fs::path d = scratch();
  if (::geteuid() == 0 && ::mknod((d / "full").c_str(), S_IFCHR | 0600, ::makedev(1, 7)) == 0)
    full.push_back((d / "full").string());
  for (const std::string& dev : full) {
    if (!fs::is_character_file(dev)) continue;
    try {
      write_file_atomic(dev, "no room");
      ADD_FAILURE() << "a write to " << dev << " succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dev), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
    }
    EXPECT_TRUE(fs::is_character_file(dev)) << dev;
  }
  fs::remove_all(d);
}

// Through a symbolic link the file it names is replaced and the link stays a link; a link to
// nothing is refused and left alone.
TEST(AtomicFile, ASymlinkIsFollowedAndKept) {
  fs::path d = scratch();
  fs::create_directories(d / "real");
  write_file_atomic((d / "real" / "f").string(), "old");
  fs::create_symlink("real/f", d / "link");
  write_file_atomic((d / "link").string(), "new");
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  EXPECT_EQ(slurp(d / "real" / "f"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(d / "real"), fs::directory_iterator{}), 1);
  fs::create_symlink("nowhere", d / "dangling");
  try {
    write_file_atomic((d / "dangling").string(), "x");
    ADD_FAILURE() << "followed a link to nothing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("which does not exist"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(d / "dangling"));
  EXPECT_FALSE(fs::exists(d / "nowhere"));
  fs::remove_all(d);
}

// A replaced file keeps its permission bits; a new one gets what open(2) would give it.
TEST(AtomicFile, PermissionsAreKeptOrFollowTheUmask) {
  fs::path d = scratch();
  const std::string f = (d / "f").string();
  mode_t mask = ::umask(027);
  write_file_atomic(f, "new");
  struct stat st {};
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  ::umask(mask);
  ASSERT_EQ(::chmod(f.c_str(), 0604), 0);
  write_file_atomic(f, "replaced");
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
  EXPECT_EQ(slurp(f), "replaced");
  fs::remove_all(d);
}

TEST(AtomicFile, StaleTemporariesOfKilledWritersAreRemovedAndNothingElse) {
  fs::path d = scratch();
  write_file_atomic((d / "last.ckpt").string(), "checkpoint");
  for (const char* name : {".last.ckpt.tmp.a1B2c3", ".last.ckpt.tmp.ZZZZZZ", ".model.ckpt.tmp.q9W8e7"})
    std::ofstream(d / name) << "half";
  // Not temporaries: a wrong suffix, no leading dot, a folder, and a link (whose target must
  // survive).
  for (const char* name : {".last.ckpt.tmp.short", "last.ckpt.tmp.a1B2c3", ".tmp.a1B2c3"})
    std::ofstream(d / name) << "keep";
  fs::create_directory(d / ".last.ckpt.tmp.folder");
  std::ofstream(d / "target") << "keep";
  fs::create_symlink(d / "target", d / ".last.ckpt.tmp.link00");
  EXPECT_EQ(remove_stale_temporaries(d.string()), 3);
  for (const char* name : {".last.ckpt.tmp.a1B2c3", ".last.ckpt.tmp.ZZZZZZ", ".model.ckpt.tmp.q9W8e7"})
    EXPECT_FALSE(fs::exists(d / name)) << name;
  for (const char* name : {".last.ckpt.tmp.short", "last.ckpt.tmp.a1B2c3", ".tmp.a1B2c3", ".last.ckpt.tmp.folder",
                           ".last.ckpt.tmp.link00", "target", "last.ckpt"})
    EXPECT_TRUE(fs::exists(fs::symlink_status(d / name))) << name;
  EXPECT_EQ(slurp(d / "last.ckpt"), "checkpoint");
  EXPECT_EQ(remove_stale_temporaries((d / "missing-dir").string()), 0);
  fs::remove_all(d);
}
