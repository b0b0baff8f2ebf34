#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ember {

void write_all(std::FILE* f, const void* data, size_t n, const std::string& what) {
  if (n == 0) return;
  EMBER_CHECK(std::fwrite(data, 1, n, f) == n, "write: short write to ", what, " (", std::strerror(errno), ")");
}

void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& write) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  EMBER_CHECK(fs::is_directory(dir), "write: directory '", dir.string(), "' for '", path, "' does not exist");
  // Renaming over a folder fails, and over a device or a pipe (as root, /dev/full) replaces it
  // with a regular file: only a regular file (or nothing) may be there.
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  EMBER_CHECK(!fs::exists(st) || fs::is_regular_file(st), "write: '", path,
              "' exists and is not a regular file (a folder, device or pipe); expected a file to create or replace");
  // Built by appending: GCC 12 warns falsely (-Wrestrict, its bug 105329) about "." + string.
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += ".tmp.XXXXXX";
  std::string tmpl = (dir / tmp_name).string();
  int fd = ::mkstemp(tmpl.data());
  EMBER_CHECK(fd >= 0, "write: cannot create a temporary file next to '", path, "' (", std::strerror(errno), ")");
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    EMBER_FAIL("write: cannot open a temporary file for '", path, "'");
  }
  try {
    write(f);
    EMBER_CHECK(std::fflush(f) == 0, "write: flushing '", path, "' failed (", std::strerror(errno), ")");
    EMBER_CHECK(::fsync(::fileno(f)) == 0, "write: fsync of '", path, "' failed (", std::strerror(errno), ")");
  } catch (...) {
    std::fclose(f);
    ::unlink(tmpl.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    ::unlink(tmpl.c_str());
    EMBER_FAIL("write: closing '", path, "' failed (", std::strerror(errno), ")");
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmpl.c_str());
    EMBER_FAIL("write: renaming the temporary file to '", path, "' failed (", std::strerror(err), ")");
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some filesystems refuse fsync on directories
    ::close(dfd);
  }
}

}  // namespace ember
