#include "data/vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/text_corpus.h"

namespace ember::data {

namespace {

constexpr const char* kSpecialNames[] = {"<pad>", "<unk>", "<eos>"};
constexpr const char* kMagic = "ember-vocabulary 1";

// Decodes the code point at s[i] of valid UTF-8; n receives its byte length.
uint32_t decode_cp(std::string_view s, size_t i, size_t& n) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    n = 1;
    return c;
  }
  n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  uint32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

void encode_cp(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t lower(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  return cp;
}

bool is_space(uint32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\r' || cp == '\f' || cp == '\v' || cp == 0xA0 ||
         (cp >= 0x2000 && cp <= 0x200B) || cp == 0x3000;
}

bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  switch (cp) {
    case 0xA1:    // ¡
    case 0xA7:    // §
    case 0xAB:    // «
    case 0xB0:    // °
    case 0xB4:    // ´ (often typed as an apostrophe)
    case 0xB7:    // ·
    case 0xBB:    // »
    case 0xBF:    // ¿
    case 0xD7:    // ×
    case 0xF7:    // ÷
    case 0x20AC:  // €
      return false;
    default:
      break;
  }
  if (cp >= 0x2010 && cp <= 0x205E) return false;  // dashes, quotes, …, primes and other General Punctuation
  return !is_space(cp);
}

const char* const kClosing[] = {".", ",", ";", ":", "!", "?", ")", "]", "}", "»", "…", "%"};
const char* const kOpening[] = {"(", "[", "{", "¿", "¡", "«"};

bool one_of(const std::string& s, const char* const* set, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (s == set[i]) return true;
  return false;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> tokenize(std::string_view text, TokenizerOptions opts) {
  const int64_t bad = utf8_invalid_offset(text);
  EMBER_CHECK(bad < 0, "tokenize: the text is not valid UTF-8 (first bad byte at offset ", bad, ")");
  std::vector<std::string> out;
  if (opts.level == TokenLevel::Char) {
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      size_t n;
      const uint32_t cp = decode_cp(text, i, n);
      std::string t;
      if (opts.lowercase)
        encode_cp(lower(cp), t);
      else
        t.assign(text.substr(i, n));
      out.push_back(std::move(t));
      i += n;
    }
    return out;
  }
  std::string word;
  auto flush = [&] {
    if (!word.empty()) out.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < text.size();) {
    size_t n;
    const uint32_t cp = decode_cp(text, i, n);
    if (is_word_char(cp)) {
      encode_cp(opts.lowercase ? lower(cp) : cp, word);
    } else if (cp == '\'' && !word.empty() && i + 1 < text.size()) {
      size_t n2;
      if (is_word_char(decode_cp(text, i + 1, n2))) {
        word += '\'';  // don't, l'uomo: one token
      } else {
        flush();
        out.emplace_back("'");
      }
    } else {
      flush();
      if (cp == '\n')
        out.emplace_back("\n");
      else if (!is_space(cp))
        out.emplace_back(text.substr(i, n));
    }
    i += n;
  }
  flush();
  return out;
}

std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level) {
  std::string out;
  const size_t nc = std::size(kClosing), no = std::size(kOpening);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (level == TokenLevel::Word && i > 0) {
      const std::string& prev = tokens[i - 1];
      const std::string& cur = tokens[i];
      const bool glue = prev == "\n" || cur == "\n" || prev.empty() || cur.empty() || one_of(cur, kClosing, nc) ||
                        one_of(prev, kOpening, no);
      if (!glue) out += ' ';
    }
    out += tokens[i];
  }
  return out;
}

Vocabulary::Vocabulary(TokenizerOptions tokenizer) : tok_(tokenizer) {
  for (const char* s : kSpecialNames) add(s, 0);
}

int64_t Vocabulary::add(std::string token, int64_t freq) {
  const auto id = static_cast<int64_t>(tokens_.size());
  auto [it, fresh] = index_.emplace(token, id);
  EMBER_CHECK(fresh, "Vocabulary: the token '", escape(token), "' appears twice");
  tokens_.push_back(std::move(token));
  freq_.push_back(freq);
  return id;
}

Vocabulary Vocabulary::build(const std::vector<std::string>& texts, TokenizerOptions tokenizer, VocabOptions opts) {
  EMBER_CHECK(opts.min_freq >= 1, "Vocabulary::build: min_freq must be at least 1, got ", opts.min_freq);
  EMBER_CHECK(opts.max_size == 0 || opts.max_size > kSpecials, "Vocabulary::build: max_size must be 0 (no limit) or ",
              "more than the ", kSpecials, " special tokens, got ", opts.max_size);
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& t : texts)
    for (auto& tok : tokenize(t, tokenizer)) ++counts[std::move(tok)];
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  Vocabulary v(tokenizer);
  int64_t dropped = 0;
  for (auto& [tok, n] : sorted) {
    const bool special = std::find(std::begin(kSpecialNames), std::end(kSpecialNames), tok) != std::end(kSpecialNames);
    if (special || n < opts.min_freq || (opts.max_size > 0 && v.size() >= opts.max_size)) {
      dropped += n;
      continue;
    }
    v.add(tok, n);
  }
  v.freq_[kUnk] = dropped;
  return v;
}

bool Vocabulary::contains(std::string_view token) const {
  return index_.count(std::string(token)) > 0;
}

int64_t Vocabulary::id(std::string_view token) const {
  auto it = index_.find(std::string(token));
  return it == index_.end() ? kUnk : it->second;
}

const std::string& Vocabulary::token(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < size(), "Vocabulary: id ", id, " is out of range [0, ", size(), ")");
  return tokens_[static_cast<size_t>(id)];
}

int64_t Vocabulary::frequency(int64_t id) const {
  token(id);  // range check
  return freq_[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocabulary::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  for (const auto& t : tokenize(text, tok_)) ids.push_back(id(t));
  return ids;
}

std::string Vocabulary::decode(const std::vector<int64_t>& ids) const {
  std::vector<std::string> toks;
  toks.reserve(ids.size());
  for (int64_t i : ids)
    if (i != kPad) toks.push_back(token(i));
  return detokenize(toks, tok_.level);
}

void Vocabulary::save(const std::string& path) const {
  write_file_atomic(path, [&](std::FILE* f) {
    std::ostringstream os;
    os << kMagic << "\n"
       << "level " << (tok_.level == TokenLevel::Char ? "char" : "word") << "\n"
       << "lowercase " << (tok_.lowercase ? 1 : 0) << "\n"
       << "size " << size() << "\n";
    for (size_t i = 0; i < tokens_.size(); ++i) os << escape(tokens_[i]) << '\t' << freq_[i] << '\n';
    const std::string s = os.str();
    write_all(f, s.data(), s.size(), "vocabulary file " + path);
  });
}

Vocabulary Vocabulary::load(const std::string& path) {
  const std::string text = read_text_file(path);
  std::istringstream in(text);
  std::string line;
  int64_t lineno = 0;
  auto next = [&](const char* what) {
    EMBER_CHECK(std::getline(in, line), "Vocabulary::load: '", path, "' ends early: expected ", what, " at line ",
                lineno + 1);
    ++lineno;
  };
  next("the header");
  EMBER_CHECK(line == kMagic, "Vocabulary::load: '", path, "' is not an Ember vocabulary (line 1 is '", line,
              "', expected '", kMagic, "')");
  TokenizerOptions tok;
  next("'level char|word'");
  EMBER_CHECK(line == "level char" || line == "level word", "Vocabulary::load: '", path, "' line ", lineno,
              ": expected 'level char' or 'level word', got '", line, "'");
  tok.level = line == "level char" ? TokenLevel::Char : TokenLevel::Word;
  next("'lowercase 0|1'");
  EMBER_CHECK(line == "lowercase 0" || line == "lowercase 1", "Vocabulary::load: '", path, "' line ", lineno,
              ": expected 'lowercase 0' or 'lowercase 1', got '", line, "'");
  tok.lowercase = line == "lowercase 1";
  next("'size N'");
  int64_t n = -1;
  {
    std::istringstream ls(line);
    std::string key, rest;
    ls >> key >> n;
    EMBER_CHECK(key == "size" && ls && !(ls >> rest) && n >= kSpecials, "Vocabulary::load: '", path, "' line ", lineno,
                ": expected 'size N' with N >= ", kSpecials, ", got '", line, "'");
  }
  Vocabulary v(tok);
  for (int64_t id = 0; id < n; ++id) {
    next("a 'token<TAB>frequency' line");
    const size_t tab = line.rfind('\t');
    EMBER_CHECK(tab != std::string::npos, "Vocabulary::load: '", path, "' line ", lineno,
                ": expected 'token<TAB>frequency'");
    std::string token;
    for (size_t i = 0; i < tab; ++i) {
      if (line[i] != '\\') {
        token += line[i];
        continue;
      }
      EMBER_CHECK(i + 1 < tab, "Vocabulary::load: '", path, "' line ", lineno, ": a lone '\\' at the end of the token");
      const char e = line[++i];
      EMBER_CHECK(e == 'n' || e == 't' || e == 'r' || e == '\\', "Vocabulary::load: '", path, "' line ", lineno,
                  ": unknown escape '\\", e, "'");
      token += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : '\\';
    }
    int64_t freq = -1;
    try {
      size_t used = 0;
      freq = std::stoll(line.substr(tab + 1), &used);
      if (used != line.size() - tab - 1) freq = -1;
    } catch (const std::exception&) {
    }
    EMBER_CHECK(freq >= 0, "Vocabulary::load: '", path, "' line ", lineno, ": the frequency '", line.substr(tab + 1),
                "' is not a non-negative integer");
    EMBER_CHECK(!token.empty(), "Vocabulary::load: '", path, "' line ", lineno, ": empty token");
    if (id < kSpecials) {
      EMBER_CHECK(token == kSpecialNames[id], "Vocabulary::load: '", path, "' line ", lineno, ": id ", id, " must be ",
                  kSpecialNames[id], ", got '", escape(token), "'");
      v.freq_[static_cast<size_t>(id)] = freq;
      continue;
    }
    EMBER_CHECK(!v.contains(token), "Vocabulary::load: '", path, "' line ", lineno, ": the token '", escape(token),
                "' appears twice");
    if (tok.level == TokenLevel::Char)
      EMBER_CHECK(utf8_chars(token).size() == 1, "Vocabulary::load: '", path, "' line ", lineno,
                  ": a character vocabulary holds single characters, got '", escape(token), "'");
    v.add(token, freq);
  }
  EMBER_CHECK(!std::getline(in, line) || (line.empty() && !std::getline(in, line)), "Vocabulary::load: '", path,
              "' has more lines than its size ", n);
  return v;
}

bool Vocabulary::same_ids_as(const Vocabulary& other) const {
  return tok_.level == other.tok_.level && tok_.lowercase == other.tok_.lowercase && tokens_ == other.tokens_;
}

}  // namespace ember::data
