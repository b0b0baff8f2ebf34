// Text corpora from files: reading UTF-8 text with a clear error for a missing, empty or
// mis-encoded file, splitting fortune(6) files into their entries (entries are separated by lines
// holding a single "%"), listing the fortune files of a directory the way Debian's fortunes
// packages lay them out, and the small corpus utilities the text examples share (UTF-8 code
// points, de-duplication, a seeded train/test split).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::data {

struct TextFileOptions {
  // Invalid UTF-8 is an ember::Error naming the file, line and byte; with this set, each invalid
  // byte becomes U+FFFD instead (for corpora known to hold stray Latin-1 bytes).
  bool replace_invalid = false;
  bool allow_empty = false;  // an empty file is an error unless set
};

// The whole file as UTF-8 text: a leading byte-order mark is dropped and CRLF line ends become LF.
std::string read_text_file(const std::string& path, TextFileOptions opts = {});

// Byte offset of the first invalid UTF-8 sequence (overlong forms, surrogates and code points
// past U+10FFFF are invalid), or -1 when `text` is valid.
int64_t utf8_invalid_offset(std::string_view text);
// `text` with every invalid byte replaced by U+FFFD.
std::string utf8_sanitize(std::string_view text);
// The code points of valid UTF-8 `text`, each as its own (1 to 4 byte) string.
std::vector<std::string> utf8_chars(std::string_view text);

// The entries of a fortune file: text between lines that hold only "%". Leading blank lines and
// trailing whitespace of each entry are dropped, and so are entries left empty.
std::vector<std::string> split_fortunes(std::string_view text);

// The fortune files directly inside `dir`, sorted by name: regular files only, skipping the
// strfile indexes (*.dat), the *.u8 links, hidden files, subdirectories (e.g. fortunes-es's
// offensive "off/") and symbolic links (Debian's fortunes-it links its files into the English
// directory; following them would mix languages). An ember::Error when `dir` is missing, not a
// directory or holds no fortune file.
std::vector<std::string> fortune_files(const std::string& dir);

// Every fortune of a file, or of every fortune file in a directory (in fortune_files order).
// An ember::Error when there is none.
std::vector<std::string> read_fortunes(const std::string& path, TextFileOptions opts = {});

// `texts` without repeats, keeping each text's first occurrence in order (fortune collections
// repeat some entries across files; a repeat on both sides of a split would flatter the test).
std::vector<std::string> unique_texts(const std::vector<std::string>& texts);

// A seeded random split of the indices [0, n): round(n * test_fraction) of them go to `test`.
// Both lists come back sorted. An ember::Error unless 0 < test_fraction < 1 and both sides get at
// least one index.
struct SplitIndices {
  std::vector<int64_t> train, test;
};
SplitIndices split_indices(int64_t n, double test_fraction, uint64_t seed);

}  // namespace ember::data
