#include "core/input_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ember {

InputFile open_input_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  EMBER_CHECK(std::filesystem::exists(st), path, ": does not exist (expected ", what, ")");
  // fopen opens a folder for reading on Linux; only the first read fails, with EISDIR.
  EMBER_CHECK(!std::filesystem::is_directory(st), path, ": is a folder (expected ", what, ")");
  InputFile f(std::fopen(path.c_str(), "rb"));
  EMBER_CHECK(f, path, ": cannot be read: ", std::strerror(errno), " (expected ", what, ")");
  return f;
}

std::string read_input_file(const std::string& path, const std::string& what) {
  InputFile f = open_input_file(path, what);
  std::string out;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.append(buf, n);
  EMBER_CHECK(!std::ferror(f.get()), path, ": reading it failed: ", std::strerror(errno), " (expected ", what, ")");
  return out;
}

}  // namespace ember
