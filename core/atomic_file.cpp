#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ember {
namespace {

// The temporary file's name beside its target: "." + the target's name + this; mkstemp fills the
// six Xs. remove_stale_temporaries() recognises leftovers by the same pattern.
constexpr const char* kTemporarySuffix = ".tmp.XXXXXX";

namespace fs = std::filesystem;

// 0666 less the umask, the mode open(2) would give a new file. umask(2) can only be read by
// setting it, which races with other threads; Linux reports it in /proc/self/status.
mode_t new_file_mode() {
  mode_t mask = 022;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Umask:", 0) == 0) {
      mask = static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
      break;
    }
  }
  return 0666 & ~mask;
}

const char* kind_of(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

// Runs `write` on `fd` (which it takes over), then flushes, fsyncs when `sync` and closes; any
// failure closes the file and throws, naming `path`.
void write_fd(int fd, const std::string& path, bool sync, const std::function<void(std::FILE*)>& write) {
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    EMBER_FAIL("write: cannot open a stream for '", path, "'");
  }
  try {
    write(f);
    EMBER_CHECK(std::fflush(f) == 0, "write: writing '", path, "' failed (", std::strerror(errno), ")");
    EMBER_CHECK(!sync || ::fsync(::fileno(f)) == 0, "write: fsync of '", path, "' failed (", std::strerror(errno), ")");
  } catch (...) {
    std::fclose(f);
    throw;
  }
  EMBER_CHECK(std::fclose(f) == 0, "write: closing '", path, "' failed (", std::strerror(errno), ")");
}

// Into a pipe or a character device: there is nothing to replace, and a rename would turn the
// device node into a regular file (as root) or the pipe into a file nobody reads.
void write_through(const std::string& path, bool fifo, const std::function<void(std::FILE*)>& write) {
  // O_NONBLOCK: opening a pipe that no process reads fails with ENXIO instead of waiting forever.
  int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (fd < 0) {
    EMBER_CHECK(errno != ENXIO, "write: '", path, "' is a pipe that no process is reading");
    EMBER_FAIL("write: cannot open '", path, "' (", std::strerror(errno), ")");
  }
  if (fifo) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  write_fd(fd, path, /*sync=*/false, write);  // a pipe or a device has nothing to fsync
}

// A temporary file next to `target`, renamed over it. `mode` is the published file's permissions.
void write_replacing(const std::string& path, const fs::path& target, mode_t mode,
                     const std::function<void(std::FILE*)>& write) {
  fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  EMBER_CHECK(fs::is_directory(dir), "write: directory '", dir.string(), "' for '", path, "' does not exist");
  // Built by appending: GCC 12 warns falsely (-Wrestrict, its bug 105329) about "." + string.
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += kTemporarySuffix;  // mkstemp fills the Xs
  std::string tmpl = (dir / tmp_name).string();
  int fd = ::mkstemp(tmpl.data());
  EMBER_CHECK(fd >= 0, "write: cannot create a temporary file next to '", path, "' (", std::strerror(errno), ")");
  ::fchmod(fd, mode);  // mkstemp creates 0600
  try {
    write_fd(fd, path, /*sync=*/true, write);
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
  if (::rename(tmpl.c_str(), target.c_str()) != 0) {
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

}  // namespace

void write_all(std::FILE* f, const void* data, size_t n, const std::string& what) {
  if (n == 0) return;
  EMBER_CHECK(std::fwrite(data, 1, n, f) == n, "write: short write to ", what, " (", std::strerror(errno), ")");
}

void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& write) {
  EMBER_CHECK(!path.empty(), "write: empty file name; expected a path");
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(path, ec);
  const fs::file_status st = fs::status(path, ec);  // what a link points to
  if (fs::is_symlink(link) && !fs::exists(st)) {
    std::error_code ignored;
    EMBER_FAIL("write: '", path, "' is a symbolic link to '", fs::read_symlink(path, ignored).string(),
               "', which does not exist; expected a file to create or replace, or a link to one");
  }
  if (!fs::exists(st)) return write_replacing(path, fs::path(path), new_file_mode(), write);
  if (fs::is_regular_file(st)) {
    // Through a link, the file it names is replaced and the link kept. /proc/self/fd/N links name
    // their file, so /dev/stdout redirected to a file lands in that file.
    fs::path target = fs::path(path);
    if (fs::is_symlink(link)) {
      target = fs::canonical(path, ec);
      EMBER_CHECK(!ec, "write: cannot resolve the symbolic link '", path, "' (", ec.message(), ")");
    }
    return write_replacing(path, target, static_cast<mode_t>(st.permissions()) & 07777, write);
  }
  if (fs::is_fifo(st) || fs::is_character_file(st)) return write_through(path, fs::is_fifo(st), write);
  EMBER_FAIL("write: '", path, "' exists and is ", kind_of(st), "; expected a file to create or replace");
}

void write_file_atomic(const std::string& path, std::string_view content) {
  write_file_atomic(path, [&](std::FILE* f) { write_all(f, content.data(), content.size(), "'" + path + "'"); });
}

int remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // write_replacing's names: "." + the target's name + kTemporarySuffix with its Xs filled.
    const size_t suffix = std::strlen(kTemporarySuffix);
    const size_t at = name.size() >= suffix + 2 ? name.size() - suffix : std::string::npos;
    if (at == std::string::npos || name[0] != '.' || name.compare(at, suffix - 6, kTemporarySuffix, suffix - 6) != 0)
      continue;
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    if (fs::remove(it->path(), ec)) ++removed;
  }
  return removed;
}

}  // namespace ember
