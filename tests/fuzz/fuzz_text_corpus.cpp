// Text corpora (data/text_corpus.h: `--data` of the text examples, fortune files) on arbitrary
// bytes, through what the text examples do with them: read as UTF-8 (strictly, or replacing
// invalid bytes: the first byte picks), split into fortunes, de-duplicated, tokenized by
// character or word and encoded with a vocabulary built from them. Every text that survives
// reading is valid UTF-8, and a character vocabulary encodes and decodes it back unchanged.
#include "data/text_corpus.h"
#include "data/vocabulary.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t o = data[0];
  const std::string& path = fuzz::scratch_file(data + 1, size - 1, ".txt");
  fuzz::errors_only([&] {
    using namespace ember::data;
    TextFileOptions opt;
    opt.replace_invalid = (o & 1) != 0;
    opt.allow_empty = (o & 2) != 0;
    const std::string text = read_text_file(path, opt);
    if (utf8_invalid_offset(text) >= 0) std::abort();
    const std::vector<std::string> fortunes = unique_texts(split_fortunes(text));
    TokenizerOptions tok;
    tok.level = (o & 4) ? TokenLevel::Word : TokenLevel::Char;
    tok.lowercase = (o & 8) != 0;
    VocabOptions vo;
    vo.min_freq = 1 + ((o >> 4) & 1);
    vo.max_size = (o & 32) ? 8 : 0;
    const Vocabulary vocab = Vocabulary::build(fortunes, tok, vo);
    for (const std::string& f : fortunes) {
      const std::vector<int64_t> ids = vocab.encode(f);
      const std::string back = vocab.decode(ids);
      // Every character of `f` is in an unlimited character vocabulary: the round trip is exact.
      if (tok.level == TokenLevel::Char && !tok.lowercase && vo.min_freq == 1 && vo.max_size == 0 && back != f)
        std::abort();
      (void)detokenize(tokenize(f, tok), tok.level);
    }
    if (fortunes.size() >= 2) (void)split_indices(static_cast<int64_t>(fortunes.size()), 0.5, o);
  });
  return 0;
}
