// Datasets over tokenised text, for the recurrent models:
// - LanguageModelDataset cuts a token stream into fixed-length sequences; example i is
//   (tokens[s, s+L), tokens[s+1, s+L+1)) with s = i * stride: the target is the input shifted by
//   one, so a model learns to predict each next token.
// - LabelledTextDataset holds (text, label) pairs for a classifier. Its examples have their own
//   lengths; a batch is padded with <pad> (id 0) to its longest member, and padded_lengths()
//   recovers the lengths from it (encode never produces <pad>), which is what
//   models::BiLstmClassifier needs to ignore the padding.
// Also: turning documents into one stream, reading "label<TAB>text" files, and the unigram
// perplexity that a language model should beat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/vocabulary.h"

namespace ember::data {

// The encoded documents in order, each followed by <eos> when `eos` is set.
std::vector<int64_t> encode_documents(const Vocabulary& vocab, const std::vector<std::string>& docs, bool eos = true);

class LanguageModelDataset : public Dataset {
 public:
  // stride 0 means stride = seq_len (sequences that do not overlap). Needs at least seq_len + 1
  // tokens.
  LanguageModelDataset(std::vector<int64_t> tokens, int64_t seq_len, int64_t stride = 0);
  int64_t size() const override { return count_; }
  // input and target: int64 [seq_len].
  Example get(int64_t index, Generator& gen) const override;
  // input and target: int64 [B, seq_len].
  Example get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const override;

  int64_t seq_len() const { return seq_len_; }
  int64_t stride() const { return stride_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }
  // The target tokens of every example in index order: what a perplexity over this dataset scores.
  std::vector<int64_t> targets() const;

 private:
  std::vector<int64_t> tokens_;
  int64_t seq_len_, stride_, count_;
};

// Perplexity on `eval` of the unigram model estimated from `train` with add-`smoothing` counts
// over all vocab_size ids: exp(-mean log p(token)). The baseline a language model must beat.
double unigram_perplexity(const std::vector<int64_t>& train, const std::vector<int64_t>& eval, int64_t vocab_size,
                          double smoothing = 1.0);

struct LabelledText {
  std::string text;
  int64_t label = 0;
};

// Labelled lines read from a file; labels are numbered in order of first appearance.
struct LabelledCorpus {
  std::vector<std::string> classes;
  std::vector<LabelledText> items;
};
// One "label<TAB>text" per line (blank lines skipped). A line without the separator, or with an
// empty label or text, is an ember::Error naming the file and line.
LabelledCorpus read_labelled_lines(const std::string& path, char separator = '\t');

class LabelledTextDataset : public Dataset {
 public:
  // Encodes every text (keeping its first max_len tokens when max_len > 0). A text without any
  // token, or a label outside [0, num_classes), is an ember::Error naming the item.
  LabelledTextDataset(const std::vector<LabelledText>& items, const Vocabulary& vocab, int64_t num_classes,
                      int64_t max_len = 0);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  // input int64 [length], target int64 scalar (0-dim).
  Example get(int64_t index, Generator& gen) const override;
  // input int64 [B, longest] padded with Vocabulary::kPad, target int64 [B].
  Example get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>& gens) const override;

  int64_t num_classes() const { return num_classes_; }
  int64_t label(int64_t index) const;
  int64_t length(int64_t index) const;
  std::vector<int64_t> class_counts() const;

 private:
  std::vector<std::vector<int64_t>> ids_;
  std::vector<int64_t> labels_;
  int64_t num_classes_;
};

// Pads 1-D int64 sequences to the longest with `pad_id`: tokens [B, longest] and lengths [B].
struct PaddedBatch {
  Tensor tokens;
  Tensor lengths;
};
PaddedBatch pad_sequences(const std::vector<Tensor>& sequences, int64_t pad_id = Vocabulary::kPad);

// Per row of a padded int64 [B, T] batch, the number of tokens before the first `pad_id`. A row
// with a token after its padding is an ember::Error (it was not padded at the end).
std::vector<int64_t> padded_lengths(const Tensor& tokens, int64_t pad_id = Vocabulary::kPad);

}  // namespace ember::data
