// Text corpora, vocabularies and text datasets: values against hand-computed ones, and every
// error kind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/ops.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "data/text_datasets.h"
#include "data/vocabulary.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::data;
using test_util::expect_error;
namespace fs = std::filesystem;

namespace {

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("ember_text_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name, const std::string& content) const {
    auto p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
  std::string str() const { return path_.string(); }
  fs::path path() const { return path_; }

 private:
  fs::path path_;
};

}  // namespace

TEST(TextCorpus, Utf8Validation) {
  EXPECT_EQ(utf8_invalid_offset("plain ascii"), -1);
  EXPECT_EQ(utf8_invalid_offset("Gr\xC3\xBC\xC3\x9F"
                                "e \xE2\x82\xAC \xF0\x9F\x98\x80"),
            -1);  // Grüße € 😀
  EXPECT_EQ(utf8_invalid_offset("ab\xE9"
                                "cd"),
            2);                                           // Latin-1 é
  EXPECT_EQ(utf8_invalid_offset("\xC0\xAF"), 0);          // overlong '/'
  EXPECT_EQ(utf8_invalid_offset("x\xE0\x80\xAF"), 1);     // overlong three-byte form
  EXPECT_EQ(utf8_invalid_offset("\xED\xA0\x80"), 0);      // a UTF-16 surrogate
  EXPECT_EQ(utf8_invalid_offset("\xF4\x90\x80\x80"), 0);  // past U+10FFFF
  EXPECT_EQ(utf8_invalid_offset("ok\xE2\x82"), 2);        // truncated at the end
  EXPECT_EQ(utf8_sanitize("a\xE9z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(utf8_chars("a\xC3\xA9\xE2\x82\xAC"), (std::vector<std::string>{"a", "\xC3\xA9", "\xE2\x82\xAC"}));
  expect_error([] { utf8_chars("a\xFF"); }, "utf8_chars", "0xFF");
}

TEST(TextCorpus, ReadTextFile) {
  TempDir d;
  EXPECT_EQ(read_text_file(d.file("a.txt", "\xEF\xBB\xBFline one\r\nline two\n")), "line one\nline two\n");
  expect_error([&] { read_text_file(d.str() + "/missing.txt"); }, "read_text_file", "does not exist");
  expect_error([&] { read_text_file(d.str()); }, "read_text_file", "not a regular file");
  const std::string empty = d.file("empty.txt", "");
  expect_error([&] { read_text_file(empty); }, "read_text_file", "is empty");
  EXPECT_EQ(read_text_file(empty, {.allow_empty = true}), "");
  const std::string latin1 = d.file("latin1.txt", "first\nsecond caf\xE9\n");
  expect_error([&] { read_text_file(latin1); }, "read_text_file", "byte 0xE9 at line 2, column 11 (offset 16)");
  EXPECT_EQ(read_text_file(latin1, {.replace_invalid = true}), "first\nsecond caf\xEF\xBF\xBD\n");
}

TEST(TextCorpus, SplitFortunes) {
  auto f = split_fortunes("First one.\n%\n\n  indented\n  art  \n\n%\n%\n   \n%\nlast\nlines\n");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], "First one.");
  EXPECT_EQ(f[1], "  indented\n  art");
  EXPECT_EQ(f[2], "last\nlines");
  EXPECT_EQ(split_fortunes("no separator at all").size(), 1u);
  EXPECT_EQ(split_fortunes("50% off\n%%\n").size(), 1u);  // only a line of exactly "%" separates
  EXPECT_TRUE(split_fortunes("%\n%\n").empty());
}

TEST(TextCorpus, FortuneFilesSkipIndexesLinksAndSubfolders) {
  TempDir d;
  d.file("wisdom", "Be wise.\n%\nBe kind.\n");
  d.file("wisdom.dat", std::string("\x00\x00\x00\x02\xFF", 5));
  d.file("food", "Eat.\n");
  d.file(".hidden", "x\n");
  fs::create_symlink(d.path() / "wisdom", d.path() / "wisdom.u8");
  fs::create_symlink(d.path() / "food", d.path() / "borrowed");
  fs::create_directories(d.path() / "off");
  d.file("off/rude", "Rude.\n");
  auto files = fortune_files(d.str());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0]).filename(), "food");
  EXPECT_EQ(fs::path(files[1]).filename(), "wisdom");
  EXPECT_EQ(read_fortunes(d.str()), (std::vector<std::string>{"Eat.", "Be wise.", "Be kind."}));
  EXPECT_EQ(read_fortunes(files[1]).size(), 2u);

  expect_error([&] { fortune_files(d.str() + "/nope"); }, "fortune_files", "does not exist");
  expect_error([&] { fortune_files(files[0]); }, "fortune_files", "not a directory");
  TempDir empty;
  expect_error([&] { fortune_files(empty.str()); }, "fortune_files", "no fortune files");
  expect_error([&] { read_fortunes(empty.file("blank", "%\n\n%\n")); }, "read_fortunes", "no fortunes");
  expect_error([&] { read_fortunes(empty.str() + "/absent"); }, "read_fortunes", "does not exist");
  const std::string bad = empty.file("bad", "ok\n%\nna\xEFve\n");
  expect_error([&] { read_fortunes(bad); }, "read_text_file", "not valid UTF-8");
}

TEST(TextCorpus, DebianFortunesIfInstalled) {
  const std::string en = "/usr/share/games/fortunes", it = "/usr/share/games/fortunes/it";
  if (!fs::is_directory(en)) GTEST_SKIP() << "the fortunes package is not installed";
  for (const auto& f : fortune_files(en)) EXPECT_FALSE(fs::is_symlink(f)) << f;
  auto english = read_fortunes(en);
  EXPECT_GT(english.size(), 1000u);
  if (fs::is_directory(it)) {  // fortunes-it's links in the English folder are not followed
    std::set<std::string> en_set(english.begin(), english.end());
    int shared = 0;
    for (const auto& s : read_fortunes(it)) shared += static_cast<int>(en_set.count(s));
    EXPECT_LT(shared, 10);  // the odd quotation both collections hold, not 8,000 Italian entries
  }
}

TEST(TextCorpus, UniqueAndSplit) {
  EXPECT_EQ(unique_texts({"b", "a", "b", "c", "a"}), (std::vector<std::string>{"b", "a", "c"}));
  auto s = split_indices(10, 0.3, 7);
  EXPECT_EQ(s.test.size(), 3u);
  EXPECT_EQ(s.train.size(), 7u);
  std::set<int64_t> all(s.train.begin(), s.train.end());
  all.insert(s.test.begin(), s.test.end());
  EXPECT_EQ(all.size(), 10u);
  EXPECT_TRUE(std::is_sorted(s.test.begin(), s.test.end()));
  EXPECT_EQ(split_indices(10, 0.3, 7).test, s.test);  // a function of the seed
  bool differs = false;
  for (uint64_t seed = 8; seed < 16 && !differs; ++seed) differs = split_indices(10, 0.3, seed).test != s.test;
  EXPECT_TRUE(differs);
  expect_error([] { split_indices(10, 0.0, 1); }, "split_indices", "(0, 1)");
  expect_error([] { split_indices(10, 1.5, 1); }, "split_indices", "(0, 1)");
  expect_error([] { split_indices(1, 0.5, 1); }, "split_indices", "empty");
}

TEST(Tokenizer, CharacterLevel) {
  EXPECT_EQ(tokenize("Ab é\n"), (std::vector<std::string>{"A", "b", " ", "\xC3\xA9", "\n"}));
  EXPECT_EQ(tokenize("\xC3\x89tat AB", {.level = TokenLevel::Char, .lowercase = true}),
            (std::vector<std::string>{"\xC3\xA9", "t", "a", "t", " ", "a", "b"}));
  expect_error([] { tokenize("bad \xFF"); }, "tokenize", "UTF-8");
}

TEST(Tokenizer, WordLevel) {
  TokenizerOptions w{.level = TokenLevel::Word};
  EXPECT_EQ(
      tokenize("Don't panic, l'uomo!\n  \xC2\xBF"
               "Qu\xC3\xA9 tal?  ",
               w),
      (std::vector<std::string>{"Don't", "panic", ",", "l'uomo", "!", "\n", "\xC2\xBF", "Qu\xC3\xA9", "tal", "?"}));
  EXPECT_EQ(tokenize("\xE2\x80\x9CGr\xC3\xBC\xC3\x9F"
                     "e\xE2\x80\x9D 42x 'quoted'",
                     w),
            (std::vector<std::string>{"\xE2\x80\x9C",
                                      "Gr\xC3\xBC\xC3\x9F"
                                      "e",
                                      "\xE2\x80\x9D", "42x", "'", "quoted", "'"}));
  EXPECT_EQ(tokenize("\xC3\x9C"
                     "BER Alles",
                     {.level = TokenLevel::Word, .lowercase = true}),
            (std::vector<std::string>{"\xC3\xBC"
                                      "ber",
                                      "alles"}));
  EXPECT_EQ(detokenize({"Hello", ",", "world", "!", "\n", "(", "yes", ")"}, TokenLevel::Word), "Hello, world!\n(yes)");
  EXPECT_EQ(detokenize({"a", "b", " "}, TokenLevel::Char), "ab ");
}

TEST(Vocabulary, SameIdsAsComparesTokensAndTokenizerNotFrequencies) {
  const Vocabulary v = Vocabulary::build({"aab c", "abc"}, {});
  EXPECT_TRUE(v.same_ids_as(Vocabulary::build({"aab c", "abc"}, {})));
  EXPECT_TRUE(v.same_ids_as(Vocabulary::build({"aab c", "abc", "aab c", "abc"}, {})));  // counts doubled
  EXPECT_FALSE(v.same_ids_as(Vocabulary::build({"aab c", "abd"}, {})));                 // another token
  EXPECT_FALSE(v.same_ids_as(Vocabulary::build({"aab c", "abc"}, {.lowercase = true})));
  EXPECT_FALSE(v.same_ids_as(Vocabulary::build({"aab c", "abc"}, {.level = TokenLevel::Word})));
}

TEST(Vocabulary, BuildOrdersByFrequencyThenBytes) {
  // counts: a 5, b 3, c 3, space 2, d 1
  Vocabulary v = Vocabulary::build({"aab c", "abc", "aad cb"}, {});
  ASSERT_EQ(v.size(), Vocabulary::kSpecials + 5);
  EXPECT_EQ(v.token(0), "<pad>");
  EXPECT_EQ(v.token(1), "<unk>");
  EXPECT_EQ(v.token(2), "<eos>");
  EXPECT_EQ(v.token(3), "a");
  EXPECT_EQ(v.token(4), "b");
  EXPECT_EQ(v.token(5), "c");
  EXPECT_EQ(v.token(6), " ");
  EXPECT_EQ(v.token(7), "d");
  EXPECT_EQ(v.frequency(3), 5);
  EXPECT_EQ(v.frequency(Vocabulary::kUnk), 0);
  EXPECT_EQ(v.encode("abz"), (std::vector<int64_t>{3, 4, Vocabulary::kUnk}));
  EXPECT_EQ(v.decode({3, 0, 4, Vocabulary::kUnk, Vocabulary::kEos}), "ab<unk><eos>");
  EXPECT_TRUE(v.contains("d"));
  EXPECT_FALSE(v.contains("z"));
  expect_error([&] { v.token(8); }, "Vocabulary", "out of range");
  expect_error([&] { v.frequency(-1); }, "Vocabulary", "out of range");
}

TEST(Vocabulary, MinFrequencyAndMaxSize) {
  Vocabulary m = Vocabulary::build({"aab c", "abc", "aad cb"}, {}, {.min_freq = 3});
  EXPECT_EQ(m.size(), Vocabulary::kSpecials + 3);  // a, b, c
  EXPECT_EQ(m.frequency(Vocabulary::kUnk), 3);     // two spaces and a d became <unk>
  EXPECT_EQ(m.encode("d a"), (std::vector<int64_t>{1, 1, 3}));
  Vocabulary s = Vocabulary::build({"aab c", "abc", "aad cb"}, {}, {.max_size = 5});
  EXPECT_EQ(s.size(), 5);
  EXPECT_EQ(s.token(4), "b");
  EXPECT_EQ(s.id("c"), Vocabulary::kUnk);
  expect_error([] { Vocabulary::build({"x"}, {}, {.min_freq = 0}); }, "Vocabulary::build", "min_freq");
  expect_error([] { Vocabulary::build({"x"}, {}, {.max_size = 2}); }, "Vocabulary::build", "max_size");
}

TEST(Vocabulary, WordLevelEncodeDecode) {
  Vocabulary v = Vocabulary::build({"The cat sat.", "The dog sat, the end."}, {.level = TokenLevel::Word});
  std::vector<int64_t> ids = v.encode("The cat sat, the bird.");
  EXPECT_EQ(ids[4], v.id("the"));
  EXPECT_EQ(ids[5], Vocabulary::kUnk);
  EXPECT_EQ(v.decode(v.encode("The dog sat.")), "The dog sat.");
}

TEST(Vocabulary, SaveLoadRoundTrip) {
  TempDir d;
  for (auto tok : {TokenizerOptions{}, TokenizerOptions{.level = TokenLevel::Word, .lowercase = true}}) {
    Vocabulary v = Vocabulary::build({"tab\there\\ and\nnew line\r\n", "caf\xC3\xA9 \\n"}, tok);
    const std::string path = d.str() + "/v.vocab";
    v.save(path);
    Vocabulary w = Vocabulary::load(path);
    ASSERT_EQ(w.size(), v.size());
    EXPECT_EQ(w.tokenizer().level, tok.level);
    EXPECT_EQ(w.tokenizer().lowercase, tok.lowercase);
    for (int64_t i = 0; i < v.size(); ++i) {
      EXPECT_EQ(w.token(i), v.token(i));
      EXPECT_EQ(w.frequency(i), v.frequency(i));
    }
    EXPECT_EQ(w.encode("new caf\xC3\xA9"), v.encode("new caf\xC3\xA9"));
  }
}

TEST(Vocabulary, LoadRejectsMalformedFiles) {
  TempDir d;
  const std::string head = "ember-vocabulary 1\nlevel char\nlowercase 0\n";
  const std::string specials = "<pad>\t0\n<unk>\t0\n<eos>\t0\n";
  auto load = [&](const std::string& content) { return [&d, content] { Vocabulary::load(d.file("v", content)); }; };
  expect_error([&] { Vocabulary::load(d.str() + "/absent"); }, "does not exist");
  expect_error(load(""), "is empty");
  expect_error(load("hello\n"), "Vocabulary::load", "not an Ember vocabulary");
  expect_error(load("ember-vocabulary 1\nlevel byte\n"), "Vocabulary::load", "line 2");
  expect_error(load("ember-vocabulary 1\nlevel char\nlowercase 2\n"), "Vocabulary::load", "line 3");
  expect_error(load(head + "size x\n"), "Vocabulary::load", "line 4");
  expect_error(load(head + "size 5\n" + specials + "a\t1\n"), "Vocabulary::load", "ends early");
  expect_error(load(head + "size 4\n" + specials + "a 1\n"), "Vocabulary::load", "line 8");
  expect_error(load(head + "size 4\n" + specials + "a\t-1\n"), "Vocabulary::load", "non-negative");
  expect_error(load(head + "size 4\n" + specials + "a\t1x\n"), "Vocabulary::load", "non-negative");
  expect_error(load(head + "size 4\n" + specials + "\\q\t1\n"), "Vocabulary::load", "unknown escape");
  expect_error(load(head + "size 4\n" + specials + "ab\t1\n"), "Vocabulary::load", "single characters");
  expect_error(load(head + "size 5\n" + specials + "a\t1\na\t2\n"), "Vocabulary::load", "appears twice");
  expect_error(load(head + "size 4\n<unk>\t0\n<pad>\t0\n<eos>\t0\na\t1\n"), "Vocabulary::load", "must be <pad>");
  expect_error(load(head + "size 4\n" + specials + "a\t1\nb\t1\n"), "Vocabulary::load", "more lines");
  expect_error(load(head + "size 4\n" + specials + "\xE9\t1\n"), "not valid UTF-8");
  EXPECT_EQ(Vocabulary::load(d.file("ok", head + "size 4\n" + specials + "\\n\t1\n")).id("\n"), 3);
}

TEST(LanguageModelDataset, ShiftedSequences) {
  std::vector<int64_t> toks{10, 11, 12, 13, 14, 15, 16, 17, 18, 19};  // 10 tokens
  LanguageModelDataset ds(toks, 3);
  EXPECT_EQ(ds.size(), 3);  // starts 0, 3, 6 (6 + 3 + 1 = 10 fits)
  Generator g;
  Example e = ds.get(2, g);
  EXPECT_EQ(e.input.to_vector<int64_t>(), (std::vector<int64_t>{16, 17, 18}));
  EXPECT_EQ(e.target.to_vector<int64_t>(), (std::vector<int64_t>{17, 18, 19}));
  Example b = ds.get_batch({1, 0}, {&g, &g});
  EXPECT_EQ(b.input.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.input.to_vector<int64_t>(), (std::vector<int64_t>{13, 14, 15, 10, 11, 12}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{14, 15, 16, 11, 12, 13}));
  EXPECT_EQ(ds.targets(), (std::vector<int64_t>{11, 12, 13, 14, 15, 16, 17, 18, 19}));

  LanguageModelDataset overlap(toks, 4, 2);
  EXPECT_EQ(overlap.size(), 3);  // starts 0, 2, 4 (4 + 4 + 1 = 9 <= 10; 6 + 5 > 10)
  EXPECT_EQ(overlap.get(2, g).target.to_vector<int64_t>(), (std::vector<int64_t>{15, 16, 17, 18}));

  DataLoader loader(ds, {.batch_size = 2, .shuffle = true, .seed = 3});
  int64_t seen = 0;
  for (auto& [x, y] : loader) seen += x.size(0);
  EXPECT_EQ(seen, 3);

  expect_error([&] { LanguageModelDataset(toks, 10); }, "LanguageModelDataset", "at least 11");
  expect_error([&] { LanguageModelDataset(toks, 0); }, "LanguageModelDataset", "seq_len");
  expect_error([&] { LanguageModelDataset(toks, 2, -1); }, "LanguageModelDataset", "stride");
  expect_error([&] { ds.get(3, g); }, "LanguageModelDataset", "out of range");
  expect_error([&] { ds.get_batch({0, -1}, {&g, &g}); }, "LanguageModelDataset", "out of range");
}

TEST(LanguageModelDataset, EncodeDocumentsAndUnigram) {
  Vocabulary v = Vocabulary::build({"ab", "b"}, {});  // b: 2, a: 1 -> b = 3, a = 4
  EXPECT_EQ(encode_documents(v, {"ab", "ba"}), (std::vector<int64_t>{4, 3, 2, 3, 4, 2}));
  EXPECT_EQ(encode_documents(v, {"ab", "ba"}, false), (std::vector<int64_t>{4, 3, 3, 4}));
  // Add-one counts over 4 ids from train {2, 2, 3, 3}: 1, 1, 3, 3 of 8; eval {2, 3}.
  EXPECT_NEAR(unigram_perplexity({2, 2, 3, 3}, {2, 3}, 4), 8.0 / 3, 1e-12);
  // From {2, 2, 3}: 1, 1, 3, 2 of 7.
  EXPECT_NEAR(unigram_perplexity({2, 2, 3}, {2, 3}, 4), std::exp(-(std::log(3.0 / 7) + std::log(2.0 / 7)) / 2), 1e-12);
  // Smoothing 0.5 from {2}: 0.5, 0.5, 1.5, 0.5 of 3.
  EXPECT_NEAR(unigram_perplexity({2}, {0}, 4, 0.5), 6.0, 1e-12);
  // Uniform counts give perplexity = vocabulary size.
  EXPECT_NEAR(unigram_perplexity({0, 1, 2, 3}, {0, 1, 2, 3, 3}, 4), 4.0, 1e-12);
  expect_error([] { unigram_perplexity({0}, {}, 4); }, "unigram_perplexity", "no tokens");
  expect_error([] { unigram_perplexity({5}, {0}, 4); }, "unigram_perplexity", "training token id 5");
  expect_error([] { unigram_perplexity({0}, {-1}, 4); }, "unigram_perplexity", "evaluation token id -1");
  expect_error([] { unigram_perplexity({0}, {0}, 4, 0.0); }, "unigram_perplexity", "smoothing");
}

TEST(LabelledText, ReadLabelledLines) {
  TempDir d;
  LabelledCorpus c = read_labelled_lines(d.file("l.tsv", "en\tHello there\n\nde\tGuten Tag\nen\tBye\tnow\n"));
  EXPECT_EQ(c.classes, (std::vector<std::string>{"en", "de"}));
  ASSERT_EQ(c.items.size(), 3u);
  EXPECT_EQ(c.items[1].text, "Guten Tag");
  EXPECT_EQ(c.items[1].label, 1);
  EXPECT_EQ(c.items[2].text, "Bye\tnow");
  EXPECT_EQ(c.items[2].label, 0);
  EXPECT_EQ(read_labelled_lines(d.file("c.csv", "x,a,b\n"), ',').items[0].text, "a,b");
  expect_error([&] { read_labelled_lines(d.file("a", "en Hello\n")); }, "read_labelled_lines", "line 1");
  expect_error([&] { read_labelled_lines(d.file("b", "en\tok\n\tno label\n")); }, "read_labelled_lines",
               "line 2: empty label");
  expect_error([&] { read_labelled_lines(d.file("c", "en\t  \n")); }, "read_labelled_lines", "empty text");
  expect_error([&] { read_labelled_lines(d.file("e", "\n\n")); }, "read_labelled_lines", "no labelled lines");
  expect_error([&] { read_labelled_lines(d.str() + "/none"); }, "read_text_file", "does not exist");
}

TEST(LabelledText, DatasetPadsBatchesAndKeepsLengths) {
  Vocabulary v = Vocabulary::build({"abcde"}, {});
  LabelledTextDataset ds({{"abc", 1}, {"a", 0}, {"edcbaabc", 2}}, v, 3, 5);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.length(2), 5);  // truncated to max_len
  EXPECT_EQ(ds.class_counts(), (std::vector<int64_t>{1, 1, 1}));
  Generator g;
  Example one = ds.get(0, g);
  EXPECT_EQ(one.input.to_vector<int64_t>(), v.encode("abc"));
  EXPECT_EQ(one.target.dim(), 0);
  EXPECT_EQ(one.target.item<int64_t>(), 1);
  Example b = ds.get_batch({1, 0}, {&g, &g});
  EXPECT_EQ(b.input.shape(), (Shape{2, 3}));
  std::vector<int64_t> a = v.encode("a"), abc = v.encode("abc");
  EXPECT_EQ(b.input.to_vector<int64_t>(), (std::vector<int64_t>{a[0], 0, 0, abc[0], abc[1], abc[2]}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(padded_lengths(b.input), (std::vector<int64_t>{1, 3}));

  DataLoader loader(ds, {.batch_size = 2, .shuffle = true, .seed = 1});
  int64_t total = 0;
  for (auto& [x, y] : loader) {
    auto lens = padded_lengths(x);
    EXPECT_EQ(*std::max_element(lens.begin(), lens.end()), x.size(1));
    total += y.numel();
  }
  EXPECT_EQ(total, 3);

  expect_error([&] { LabelledTextDataset({{"abc", 3}}, v, 3); }, "LabelledTextDataset", "label 3");
  expect_error([&] { LabelledTextDataset({{"", 0}}, v, 3); }, "LabelledTextDataset", "no tokens");
  expect_error([&] { LabelledTextDataset({}, v, 3); }, "LabelledTextDataset", "no items");
  expect_error([&] { LabelledTextDataset({{"a", 0}}, v, 0); }, "LabelledTextDataset", "num_classes");
  expect_error([&] { LabelledTextDataset({{"a", 0}}, v, 1, -1); }, "LabelledTextDataset", "max_len");
  expect_error([&] { ds.get(3, g); }, "LabelledTextDataset", "out of range");
}

TEST(LabelledText, PadSequences) {
  PaddedBatch p =
      pad_sequences({from_vector(std::vector<int64_t>{5, 6}, {2}), from_vector(std::vector<int64_t>{7}, {1}),
                     from_vector(std::vector<int64_t>{8, 9, 4}, {3})},
                    -1);
  EXPECT_EQ(p.tokens.shape(), (Shape{3, 3}));
  EXPECT_EQ(p.tokens.to_vector<int64_t>(), (std::vector<int64_t>{5, 6, -1, 7, -1, -1, 8, 9, 4}));
  EXPECT_EQ(p.lengths.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 3}));
  EXPECT_EQ(padded_lengths(p.tokens, -1), (std::vector<int64_t>{2, 1, 3}));
  expect_error([] { pad_sequences({}); }, "pad_sequences", "no sequences");
  expect_error([] { pad_sequences({zeros({2, 2}, {DType::Int64})}); }, "pad_sequences", "1-D int64");
  expect_error([] { pad_sequences({zeros({2})}); }, "pad_sequences", "1-D int64");
  expect_error(
      [] {
        padded_lengths(from_vector(std::vector<int64_t>{3, 0, 4}, {1, 3}));
      },
      "padded_lengths", "position 2");
  expect_error([] { padded_lengths(zeros({3})); }, "padded_lengths", "[B, T]");
}
