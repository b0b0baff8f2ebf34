#include "data/text_datasets.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "data/text_corpus.h"

namespace ember::data {

std::vector<int64_t> encode_documents(const Vocabulary& vocab, const std::vector<std::string>& docs, bool eos) {
  std::vector<int64_t> out;
  for (const auto& d : docs) {
    std::vector<int64_t> ids = vocab.encode(d);
    out.insert(out.end(), ids.begin(), ids.end());
    if (eos) out.push_back(Vocabulary::kEos);
  }
  return out;
}

LanguageModelDataset::LanguageModelDataset(std::vector<int64_t> tokens, int64_t seq_len, int64_t stride)
    : tokens_(std::move(tokens)), seq_len_(seq_len), stride_(stride == 0 ? seq_len : stride), count_(0) {
  EMBER_CHECK(seq_len_ >= 1, "LanguageModelDataset: seq_len must be positive, got ", seq_len_);
  EMBER_CHECK(stride_ >= 1, "LanguageModelDataset: stride must be positive (or 0 for seq_len), got ", stride);
  const auto n = static_cast<int64_t>(tokens_.size());
  EMBER_CHECK(n >= seq_len_ + 1, "LanguageModelDataset: sequences of ", seq_len_, " tokens need at least ",
              seq_len_ + 1, " tokens (input plus the shifted target), got ", n);
  count_ = (n - 1 - seq_len_) / stride_ + 1;
}

Example LanguageModelDataset::get(int64_t index, Generator&) const {
  EMBER_CHECK(index >= 0 && index < count_, "LanguageModelDataset: index ", index, " is out of range [0, ", count_,
              ")");
  const auto s = static_cast<size_t>(index * stride_);
  const auto L = static_cast<size_t>(seq_len_);
  std::vector<int64_t> x(tokens_.begin() + s, tokens_.begin() + s + L);
  std::vector<int64_t> y(tokens_.begin() + s + 1, tokens_.begin() + s + L + 1);
  return {from_vector(x, {seq_len_}), from_vector(y, {seq_len_})};
}

Example LanguageModelDataset::get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>&) const {
  const auto B = static_cast<int64_t>(indices.size());
  Tensor x = empty({B, seq_len_}, {DType::Int64}), y = empty({B, seq_len_}, {DType::Int64});
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  const size_t bytes = sizeof(int64_t) * static_cast<size_t>(seq_len_);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = indices[static_cast<size_t>(b)];
    EMBER_CHECK(i >= 0 && i < count_, "LanguageModelDataset: index ", i, " is out of range [0, ", count_, ")");
    const int64_t* src = tokens_.data() + i * stride_;
    std::memcpy(xp + b * seq_len_, src, bytes);
    std::memcpy(yp + b * seq_len_, src + 1, bytes);
  }
  return {x, y};
}

std::vector<int64_t> LanguageModelDataset::targets() const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count_ * seq_len_));
  for (int64_t i = 0; i < count_; ++i)
    out.insert(out.end(), tokens_.begin() + i * stride_ + 1, tokens_.begin() + i * stride_ + seq_len_ + 1);
  return out;
}

double unigram_perplexity(const std::vector<int64_t>& train, const std::vector<int64_t>& eval, int64_t vocab_size,
                          double smoothing) {
  EMBER_CHECK(vocab_size >= 1, "unigram_perplexity: vocab_size must be positive, got ", vocab_size);
  EMBER_CHECK(smoothing > 0, "unigram_perplexity: smoothing must be positive (an unseen token would get ",
              "probability 0), got ", smoothing);
  EMBER_CHECK(!eval.empty(), "unigram_perplexity: no tokens to evaluate");
  std::vector<double> counts(static_cast<size_t>(vocab_size), smoothing);
  auto check = [&](int64_t t, const char* which) {
    EMBER_CHECK(t >= 0 && t < vocab_size, "unigram_perplexity: ", which, " token id ", t, " is out of range [0, ",
                vocab_size, ")");
  };
  for (int64_t t : train) {
    check(t, "training");
    counts[static_cast<size_t>(t)] += 1;
  }
  const double total = static_cast<double>(train.size()) + smoothing * static_cast<double>(vocab_size);
  double nll = 0;
  for (int64_t t : eval) {
    check(t, "evaluation");
    nll -= std::log(counts[static_cast<size_t>(t)] / total);
  }
  return std::exp(nll / static_cast<double>(eval.size()));
}

LabelledCorpus read_labelled_lines(const std::string& path, char separator) {
  const std::string text = read_text_file(path);
  LabelledCorpus c;
  std::map<std::string, int64_t> ids;
  std::istringstream in(text);
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const size_t sep = line.find(separator);
    EMBER_CHECK(sep != std::string::npos, "read_labelled_lines: '", path, "' line ", lineno, ": expected 'label",
                separator == '\t' ? std::string("<TAB>") : std::string(1, separator), "text'");
    std::string label = line.substr(0, sep), body = line.substr(sep + 1);
    EMBER_CHECK(!label.empty(), "read_labelled_lines: '", path, "' line ", lineno, ": empty label");
    EMBER_CHECK(body.find_first_not_of(" \t") != std::string::npos, "read_labelled_lines: '", path, "' line ", lineno,
                ": empty text");
    auto [it, fresh] = ids.emplace(label, static_cast<int64_t>(c.classes.size()));
    if (fresh) c.classes.push_back(label);
    c.items.push_back({std::move(body), it->second});
  }
  EMBER_CHECK(!c.items.empty(), "read_labelled_lines: '", path, "' holds no labelled lines");
  return c;
}

LabelledTextDataset::LabelledTextDataset(const std::vector<LabelledText>& items, const Vocabulary& vocab,
                                         int64_t num_classes, int64_t max_len)
    : num_classes_(num_classes) {
  EMBER_CHECK(num_classes >= 1, "LabelledTextDataset: num_classes must be positive, got ", num_classes);
  EMBER_CHECK(max_len >= 0, "LabelledTextDataset: max_len must be 0 (no limit) or positive, got ", max_len);
  EMBER_CHECK(!items.empty(), "LabelledTextDataset: no items");
  ids_.reserve(items.size());
  labels_.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    EMBER_CHECK(items[i].label >= 0 && items[i].label < num_classes, "LabelledTextDataset: item ", i, " has label ",
                items[i].label, ", expected one in [0, ", num_classes, ")");
    std::vector<int64_t> ids = vocab.encode(items[i].text);
    EMBER_CHECK(!ids.empty(), "LabelledTextDataset: item ", i, " has no tokens (text '", items[i].text, "')");
    if (max_len > 0 && static_cast<int64_t>(ids.size()) > max_len) ids.resize(static_cast<size_t>(max_len));
    ids_.push_back(std::move(ids));
    labels_.push_back(items[i].label);
  }
}

int64_t LabelledTextDataset::label(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "LabelledTextDataset: index ", index, " is out of range [0, ", size(), ")");
  return labels_[static_cast<size_t>(index)];
}

int64_t LabelledTextDataset::length(int64_t index) const {
  label(index);  // range check
  return static_cast<int64_t>(ids_[static_cast<size_t>(index)].size());
}

std::vector<int64_t> LabelledTextDataset::class_counts() const {
  std::vector<int64_t> c(static_cast<size_t>(num_classes_), 0);
  for (int64_t l : labels_) ++c[static_cast<size_t>(l)];
  return c;
}

Example LabelledTextDataset::get(int64_t index, Generator&) const {
  const int64_t y = label(index);
  const auto& ids = ids_[static_cast<size_t>(index)];
  return {from_vector(ids, {static_cast<int64_t>(ids.size())}), scalar_tensor(static_cast<double>(y), {DType::Int64})};
}

Example LabelledTextDataset::get_batch(const std::vector<int64_t>& indices, const std::vector<Generator*>&) const {
  EMBER_CHECK(!indices.empty(), "LabelledTextDataset: empty batch");
  int64_t longest = 0;
  for (int64_t i : indices) longest = std::max(longest, length(i));
  const auto B = static_cast<int64_t>(indices.size());
  Tensor x = zeros({B, longest}, {DType::Int64}), y = empty({B}, {DType::Int64});
  static_assert(Vocabulary::kPad == 0, "zeros() pads with <pad>");
  int64_t* xp = x.data_ptr<int64_t>();
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const auto& ids = ids_[static_cast<size_t>(indices[static_cast<size_t>(b)])];
    std::memcpy(xp + b * longest, ids.data(), sizeof(int64_t) * ids.size());
    yp[b] = labels_[static_cast<size_t>(indices[static_cast<size_t>(b)])];
  }
  return {x, y};
}

PaddedBatch pad_sequences(const std::vector<Tensor>& sequences, int64_t pad_id) {
  EMBER_CHECK(!sequences.empty(), "pad_sequences: no sequences");
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    EMBER_CHECK(sequences[i].dim() == 1 && sequences[i].dtype() == DType::Int64, "pad_sequences: sequence ", i,
                " must be a 1-D int64 tensor, got ", shape_str(sequences[i].shape()), " ",
                dtype_name(sequences[i].dtype()));
    longest = std::max(longest, sequences[i].size(0));
  }
  const auto B = static_cast<int64_t>(sequences.size());
  Tensor tokens = full({B, longest}, static_cast<double>(pad_id), {DType::Int64});
  Tensor lengths = empty({B}, {DType::Int64});
  int64_t* tp = tokens.data_ptr<int64_t>();
  int64_t* lp = lengths.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    Tensor s = sequences[static_cast<size_t>(b)].cpu().contiguous();
    const int64_t n = s.size(0);
    if (n) std::memcpy(tp + b * longest, s.data_ptr<int64_t>(), sizeof(int64_t) * static_cast<size_t>(n));
    lp[b] = n;
  }
  return {tokens, lengths};
}

std::vector<int64_t> padded_lengths(const Tensor& tokens, int64_t pad_id) {
  EMBER_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::Int64, "padded_lengths: expected int64 tokens [B, T], got ",
              shape_str(tokens.shape()), " ", dtype_name(tokens.dtype()));
  Tensor t = tokens.cpu().contiguous();
  const int64_t B = t.size(0), T = t.size(1);
  const int64_t* p = t.data_ptr<int64_t>();
  std::vector<int64_t> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = p + b * T;
    int64_t n = 0;
    while (n < T && row[n] != pad_id) ++n;
    for (int64_t k = n; k < T; ++k)
      EMBER_CHECK(row[k] == pad_id, "padded_lengths: row ", b, " has a token at position ", k, " after padding at ", n,
                  " (padding must come last)");
    out[static_cast<size_t>(b)] = n;
  }
  return out;
}

}  // namespace ember::data
