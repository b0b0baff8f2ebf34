// Token vocabularies for text models: a tokenizer (UTF-8 characters, or words with punctuation
// split off) and a Vocabulary that maps tokens to ids and back. A vocabulary is built from
// training texts, keeping the tokens seen at least min_freq times, the most frequent first, up to
// max_size entries; anything else encodes as <unk>. Ids 0, 1, 2 are always <pad> (never produced
// by encode, so a padded batch's lengths can be recovered from it), <unk> and <eos> (the end of a
// document in a language-model stream). A vocabulary saves to and loads from a small text file so
// that a trained model can be used again with the same ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::data {

enum class TokenLevel { Char, Word };

struct TokenizerOptions {
  TokenLevel level = TokenLevel::Char;
  // Lower-cases ASCII and the Latin-1 letters (À-Þ); enough for the Western European corpora
  // the examples use, without a Unicode case table.
  bool lowercase = false;
};

// Char: one token per UTF-8 code point, whitespace included. Word: maximal runs of letters and
// digits (any non-ASCII code point except common punctuation such as ¿ ¡ « » “ ” — … counts as a
// letter, so accented words stay whole; an apostrophe between letters joins them), each other
// visible character alone, and each newline as a "\n" token; other whitespace only separates.
// `text` must be valid UTF-8.
std::vector<std::string> tokenize(std::string_view text, TokenizerOptions opts = {});

// Joins tokens back into text: characters are concatenated; words are separated by a space except
// around newlines, before closing punctuation and after opening punctuation (readable, not
// byte-exact).
std::string detokenize(const std::vector<std::string>& tokens, TokenLevel level);

struct VocabOptions {
  int64_t min_freq = 1;  // keep tokens seen at least this often
  int64_t max_size = 0;  // at most this many entries, the 3 special tokens included; 0 = no limit
};

class Vocabulary {
 public:
  static constexpr int64_t kPad = 0, kUnk = 1, kEos = 2, kSpecials = 3;

  // Just the special tokens.
  explicit Vocabulary(TokenizerOptions tokenizer = {});
  // Counts the tokens of `texts`; ties in frequency are ordered by the token's bytes so the ids
  // are a function of the texts alone.
  static Vocabulary build(const std::vector<std::string>& texts, TokenizerOptions tokenizer, VocabOptions opts = {});

  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const TokenizerOptions& tokenizer() const { return tok_; }
  bool contains(std::string_view token) const;
  int64_t id(std::string_view token) const;  // kUnk for a token not in the vocabulary
  const std::string& token(int64_t id) const;
  // How often the token occurred in the texts the vocabulary was built from (0 for the specials;
  // for <unk>, the occurrences of every dropped token).
  int64_t frequency(int64_t id) const;

  // True when `other` maps every token to the same id with the same tokenizer (frequencies may
  // differ): what a resumed run checks before reusing a checkpoint's embedding rows.
  bool same_ids_as(const Vocabulary& other) const;

  std::vector<int64_t> encode(std::string_view text) const;
  // Specials print as "<unk>" and "<eos>"; <pad> is skipped.
  std::string decode(const std::vector<int64_t>& ids) const;

  // A UTF-8 text file: a header, then one "token<TAB>frequency" line per id (newline, tab, CR and
  // backslash escaped as in C), written atomically. load() reports a malformed file with its line number.
  void save(const std::string& path) const;
  static Vocabulary load(const std::string& path);

 private:
  int64_t add(std::string token, int64_t freq);
  TokenizerOptions tok_;
  std::vector<std::string> tokens_;
  std::vector<int64_t> freq_;
  std::unordered_map<std::string, int64_t> index_;
};

}  // namespace ember::data
