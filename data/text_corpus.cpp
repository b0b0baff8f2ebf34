#include "data/text_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_set>

#include "core/error.h"
#include "core/generator.h"
#include "core/ops.h"

namespace ember::data {

namespace fs = std::filesystem;

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;  // a continuation byte, or a lead byte only overlong or too-large forms use
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;  // overlong / too large
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;                                           // UTF-16 surrogates
  return n;
}

std::string describe_offset(std::string_view text, size_t offset) {
  const int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  size_t line_start = 0;
  if (offset > 0) {
    const size_t nl = text.rfind('\n', offset - 1);
    if (nl != std::string_view::npos) line_start = nl + 1;
  }
  const size_t column = offset - line_start + 1;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[offset]));
  return detail::concat("byte ", byte, " at line ", line, ", column ", column, " (offset ", offset, ")");
}

}  // namespace

int64_t utf8_invalid_offset(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) return static_cast<int64_t>(i);
    i += n;
  }
  return -1;
}

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::vector<std::string> utf8_chars(std::string_view text) {
  std::vector<std::string> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    EMBER_CHECK(n != 0, "utf8_chars: invalid UTF-8 ", describe_offset(text, i));
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string read_text_file(const std::string& path, TextFileOptions opts) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  EMBER_CHECK(fs::exists(st), "read_text_file: '", path, "' does not exist");
  EMBER_CHECK(fs::is_regular_file(st), "read_text_file: '", path, "' is not a regular file");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "read_text_file: cannot open '", path, "': ", std::strerror(errno));
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EMBER_CHECK(!in.bad(), "read_text_file: error while reading '", path, "'");
  if (raw.rfind("\xEF\xBB\xBF", 0) == 0) raw.erase(0, 3);
  EMBER_CHECK(opts.allow_empty || !raw.empty(), "read_text_file: '", path, "' is empty (expected UTF-8 text)");
  const int64_t bad = utf8_invalid_offset(raw);
  if (bad >= 0) {
    EMBER_CHECK(opts.replace_invalid, "read_text_file: '", path, "' is not valid UTF-8: invalid ",
                describe_offset(raw, static_cast<size_t>(bad)),
                "; convert it (e.g. iconv -f latin1 -t utf-8) or read it with replace_invalid");
    raw = utf8_sanitize(raw);
  }
  std::string text;
  text.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    if (!(raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n')) text += raw[i];
  return text;
}

std::vector<std::string> split_fortunes(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    const size_t first = cur.find_first_not_of("\n");  // leading blank lines only: indentation is content
    const size_t last = cur.find_last_not_of(" \t\n\r\f\v");
    if (first != std::string::npos && last != std::string::npos && last >= first)
      out.push_back(cur.substr(first, last - first + 1));
    cur.clear();
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line == "%") {
      flush();
    } else {
      cur.append(line);
      cur += '\n';
    }
    pos = end + 1;
  }
  flush();
  return out;
}

std::vector<std::string> fortune_files(const std::string& dir) {
  std::error_code ec;
  EMBER_CHECK(fs::exists(dir, ec), "fortune_files: '", dir, "' does not exist");
  EMBER_CHECK(fs::is_directory(dir, ec), "fortune_files: '", dir, "' is not a directory");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_symlink() || !e.is_regular_file() || name.empty() || name[0] == '.') continue;
    const std::string ext = e.path().extension().string();
    if (ext == ".dat" || ext == ".u8") continue;
    files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  EMBER_CHECK(!files.empty(), "fortune_files: '", dir, "' holds no fortune files (expected text files of entries ",
              "separated by '%' lines, as in /usr/share/games/fortunes)");
  return files;
}

std::vector<std::string> read_fortunes(const std::string& path, TextFileOptions opts) {
  std::error_code ec;
  EMBER_CHECK(fs::exists(path, ec), "read_fortunes: '", path, "' does not exist");
  const std::vector<std::string> files = fs::is_directory(path, ec) ? fortune_files(path) : std::vector{path};
  std::vector<std::string> out;
  for (const auto& f : files) {
    TextFileOptions o = opts;
    o.allow_empty = true;  // an empty file among many is harmless; no fortune at all is not
    auto part = split_fortunes(read_text_file(f, o));
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  EMBER_CHECK(!out.empty(), "read_fortunes: no fortunes in '", path, "'");
  return out;
}

std::vector<std::string> unique_texts(const std::vector<std::string>& texts) {
  std::unordered_set<std::string_view> seen;
  std::vector<std::string> out;
  for (const auto& t : texts)
    if (seen.insert(t).second) out.push_back(t);
  return out;
}

SplitIndices split_indices(int64_t n, double test_fraction, uint64_t seed) {
  EMBER_CHECK(test_fraction > 0 && test_fraction < 1, "split_indices: test_fraction must be in (0, 1), got ",
              test_fraction);
  const auto n_test = static_cast<int64_t>(std::llround(static_cast<double>(n) * test_fraction));
  EMBER_CHECK(n_test >= 1 && n_test < n, "split_indices: ", n, " items with test_fraction ", test_fraction,
              " leave one side empty");
  Generator g(seed);
  std::vector<int64_t> perm = randperm(n, &g).to_vector<int64_t>();
  SplitIndices s;
  s.test.assign(perm.begin(), perm.begin() + n_test);
  s.train.assign(perm.begin() + n_test, perm.end());
  std::sort(s.test.begin(), s.test.end());
  std::sort(s.train.begin(), s.train.end());
  return s;
}

}  // namespace ember::data
