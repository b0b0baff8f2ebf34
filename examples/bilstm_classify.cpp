// Trains a bidirectional LSTM classifier (models/lstm.h) to tell the language of a fortune
// cookie: English, German, Italian and Spanish from Debian's fortunes, fortunes-de, fortunes-it
// and fortunes-es (whichever are installed). Fortunes are de-duplicated, their whitespace
// squashed, optionally balanced to the smallest language, and split per language into training
// and test sets; the character vocabulary comes from the training set. Each epoch ends with the
// test accuracy per language beside the majority-class baseline; the run ends with a confusion
// matrix. Progress bar, CSV metrics log, checkpoints that resume exactly; SIGTERM/SIGINT write a
// checkpoint and exit with status 75.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "data/text_datasets.h"
#include "data/vocabulary.h"
#include "layers/checkpoint.h"
#include "models/lstm.h"
#include "train/flags.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "train/training.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

// Runs of whitespace become one space: language is in the letters, not in the layout (and
// ASCII-art indentation would only waste sequence length).
std::string squash_spaces(const std::string& s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

struct Confusion {
  std::vector<std::vector<int64_t>> m;  // [true][predicted]
  explicit Confusion(int64_t k) : m(static_cast<size_t>(k), std::vector<int64_t>(static_cast<size_t>(k), 0)) {}
  int64_t total() const {
    int64_t n = 0;
    for (const auto& r : m)
      for (int64_t v : r) n += v;
    return n;
  }
  double accuracy() const {
    int64_t c = 0;
    for (size_t i = 0; i < m.size(); ++i) c += m[i][i];
    return total() ? static_cast<double>(c) / static_cast<double>(total()) : 0.0;
  }
  double class_accuracy(size_t i) const {
    int64_t n = 0;
    for (int64_t v : m[i]) n += v;
    return n ? static_cast<double>(m[i][i]) / static_cast<double>(n) : 0.0;
  }
};

std::pair<Confusion, double> evaluate(models::BiLstmClassifier& clf, const data::LabelledTextDataset& ds, Device dev,
                                      int64_t batch) {
  NoGradGuard ng;
  clf.eval();
  data::DataLoader loader(ds, {.batch_size = batch, .shuffle = false});
  Confusion cm(ds.num_classes());
  double loss_sum = 0;
  for (auto& [x, y] : loader) {
    Tensor logits = clf.forward(x.to(dev), data::padded_lengths(x));
    Tensor yd = y.to(dev);
    loss_sum += cross_entropy(logits, yd, {.reduction = Reduction::Sum}).item();
    std::vector<int64_t> pred = argmax(logits, 1).cpu().to_vector<int64_t>(), truth = y.to_vector<int64_t>();
    for (size_t i = 0; i < pred.size(); ++i) ++cm.m[static_cast<size_t>(truth[i])][static_cast<size_t>(pred[i])];
  }
  clf.train();
  return {cm, cm.total() ? loss_sum / static_cast<double>(cm.total()) : 0.0};
}

// The flags, in the order --help lists them, and what they must satisfy.
struct ClassifyFlags {
  std::string data_dir, languages, level, device, ckpt_dir, resume, log_path, precision;
  train::TensorBoardFlags tensorboard;
  train::InitFrom init;  // --init-from, --init-skip
  int64_t epochs, batch, embed, hidden, max_len, min_len, min_freq, limit, split_seed, seed, max_steps, workers,
      threads;
  double lr, clip, test_fraction;
  bool balance, overwrite;

  explicit ClassifyFlags(train::Flags& flags) {
    data_dir = flags.str("data", "/usr/share/games/fortunes", "the fortunes folder");
    precision = flags.str("precision", "fp32",
                          "fp32, bf16 (the LSTMs' and the output layer's GEMMs in bfloat16 under autocast) or fp16 "
                          "(float16 with loss scaling); docs/PRECISION.md");
    languages = flags.str("languages", "en=.,de=de,it=it,es=es",
                          "comma-separated name=folder (relative to --data) per class; missing folders are "
                          "skipped");
    level = flags.str("level", "char", "tokens: char or word");
    epochs = flags.integer_min("epochs", 3, 1, "passes over the training set");
    batch = flags.integer_min("batch-size", 32, 1, "fortunes per step");
    lr = flags.positive("lr", 2e-3, "Adam learning rate");
    clip = flags.real("clip", 1.0, "clip the gradient norm to this (0: no clipping)");
    embed = flags.integer_min("embed", 32, 1, "embedding size");
    hidden = flags.integer_min("hidden", 64, 1, "LSTM hidden size per direction");
    max_len = flags.integer_min("max-len", 128, 1, "keep the first N tokens of a fortune");
    min_len = flags.integer("min-length", 10, "drop fortunes with fewer characters (after squashing spaces)");
    min_freq = flags.integer("min-freq", 0, "keep tokens seen this often (0: 5 for char, 3 for word)");
    balance = flags.boolean("balance", true, "subsample every language to the smallest one's count");
    limit = flags.count_or_none("limit", 1, "all", "use at most N fortunes per language");
    test_fraction = flags.real_between("test-fraction", 0.2, 0, 1, "share of each language held out for testing");
    split_seed = flags.integer("split-seed", 1234, "seed of the subsampling and the split (kept apart from --seed)");
    seed = flags.integer("seed", 0, "seed for weights and shuffling");
    device = flags.device("device", "auto", "auto, cpu, cuda or cuda:N");
    ckpt_dir = flags.str("checkpoint-dir", "", "write a checkpoint (and the vocabulary) here after every epoch");
    resume = flags.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
    overwrite = flags.boolean(
        "overwrite", false, "start afresh in a checkpoint-dir that holds a checkpoint, and in a --log that holds rows");
    max_steps = flags.count_or_none("max-steps", 0, "no limit", "stop after this many optimizer steps in total");
    workers = flags.integer_in("workers", 0, 0, train::kMaxWorkers, "data-loader worker threads");
    threads = flags.integer_in("threads", 0, 0, train::kMaxThreads, "CPU threads for the math (0: all cores)");
    log_path = flags.str(
        "log", "",
        "per-epoch metrics to this CSV file (a resumed run appends; a fresh one needs --overwrite if it holds rows)");
    tensorboard = train::TensorBoardFlags(flags);
    init = train::InitFrom(flags);
  }
  // Usage errors the flag parser cannot see (exit status 2).
  void check(train::Flags& flags) const {
    if (level != "char" && level != "word") flags.fail("--level must be char or word, got '" + level + "'");
    if (resume == "auto" && ckpt_dir.empty()) flags.fail("--resume auto needs --checkpoint-dir");
    init.check(flags, resume);
    if (clip < 0 || min_len < 0 || min_freq < 0) flags.fail("--clip, --min-length and --min-freq must not be negative");
    if (precision != "fp32" && precision != "bf16" && precision != "fp16")
      flags.fail("--precision must be fp32, bf16 or fp16, got '" + precision + "'");
  }
};

// The usable fortunes of one folder: de-duplicated, whitespace squashed, long enough, --limit.
std::vector<std::string> read_language(const ClassifyFlags& f, const fs::path& dir) {
  std::vector<std::string> texts;
  for (const auto& t : data::unique_texts(data::read_fortunes(dir.string()))) {
    std::string s = squash_spaces(t);
    if (static_cast<int64_t>(data::utf8_chars(s).size()) >= f.min_len) texts.push_back(std::move(s));
  }
  texts = data::unique_texts(texts);
  if (f.limit > 0 && static_cast<int64_t>(texts.size()) > f.limit) texts.resize(static_cast<size_t>(f.limit));
  return texts;
}

// The classes: every name=folder of --languages whose folder exists. An ember::Error when a
// language has too few fortunes or fewer than two languages are found.
void read_languages(const ClassifyFlags& f, train::Flags& flags, std::vector<std::string>& names,
                    std::vector<std::vector<std::string>>& per_class) {
  std::stringstream ls(f.languages);
  for (std::string item; std::getline(ls, item, ',');) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      flags.fail("--languages expects name=folder pairs, got '" + item + "'");
    for (const auto& n : names)
      if (n == item.substr(0, eq)) flags.fail("--languages names '" + n + "' twice");
    const fs::path dir = fs::path(f.data_dir) / item.substr(eq + 1);
    if (!fs::is_directory(dir)) {
      std::printf("Skipping '%s': no folder %s (install its fortunes-* package).\n", item.substr(0, eq).c_str(),
                  dir.c_str());
      continue;
    }
    std::vector<std::string> texts = read_language(f, dir);
    EMBER_CHECK(texts.size() >= 2, dir.string(), " has ", texts.size(), " usable fortunes; need at least 2");
    names.push_back(item.substr(0, eq));
    per_class.push_back(std::move(texts));
  }
  EMBER_CHECK(names.size() >= 2, "need at least two languages, found ", names.size(), " under ", f.data_dir,
              " (scripts/setup.sh installs fortunes, fortunes-de, fortunes-it and fortunes-es)");
}

// The training and test fortunes with their classes, and the training texts (for the vocabulary).
struct Split {
  std::vector<data::LabelledText> train, test;
  std::vector<std::string> train_texts;
};

// Balances (a seeded subsample), then splits each language on its own so that every class keeps
// the test fraction exactly.
Split split_languages(const ClassifyFlags& f, std::vector<std::vector<std::string>>& per_class) {
  size_t smallest = per_class[0].size();
  for (const auto& t : per_class) smallest = std::min(smallest, t.size());
  Split out;
  for (int64_t c = 0; c < static_cast<int64_t>(per_class.size()); ++c) {
    std::vector<std::string>& texts = per_class[static_cast<size_t>(c)];
    if (f.balance && texts.size() > smallest) {
      data::SplitIndices keep = data::split_indices(static_cast<int64_t>(texts.size()),
                                                    static_cast<double>(smallest) / static_cast<double>(texts.size()),
                                                    static_cast<uint64_t>(f.split_seed + c));
      std::vector<std::string> kept;
      for (int64_t i : keep.test) kept.push_back(texts[static_cast<size_t>(i)]);
      texts = std::move(kept);
    }
    data::SplitIndices s = data::split_indices(static_cast<int64_t>(texts.size()), f.test_fraction,
                                               static_cast<uint64_t>(f.split_seed + 100 + c));
    for (int64_t i : s.train) {
      out.train.push_back({texts[static_cast<size_t>(i)], c});
      out.train_texts.push_back(texts[static_cast<size_t>(i)]);
    }
    for (int64_t i : s.test) out.test.push_back({texts[static_cast<size_t>(i)], c});
  }
  return out;
}

// What the run reports against: the class names, the class counts and the majority baseline.
struct Classes {
  std::vector<std::string> names;
  std::vector<int64_t> train_counts, test_counts;
  size_t majority = 0;
  double majority_acc = 0;
};

void print_start(const ClassifyFlags& f, const Classes& k, int64_t vocab_size, Device dev) {
  std::printf("Languages (training / test fortunes%s):", f.balance ? ", balanced" : "");
  for (size_t c = 0; c < k.names.size(); ++c)
    std::printf(" %s %lld/%lld", k.names[c].c_str(), (long long)k.train_counts[c], (long long)k.test_counts[c]);
  std::printf("\nVocabulary: %lld %s tokens; fortunes cut to %lld tokens\n", (long long)vocab_size, f.level.c_str(),
              (long long)f.max_len);
  std::printf("Majority-class baseline (always '%s'): test accuracy %.4f\n", k.names[k.majority].c_str(),
              k.majority_acc);
  std::printf("Training BiLstmClassifier (embed %lld, hidden %lld x 2) on %s: %lld epochs, batch %lld, Adam lr %g\n",
              (long long)f.embed, (long long)f.hidden, train::device_label(dev).c_str(), (long long)f.epochs,
              (long long)f.batch, f.lr);
}

// One step on a batch of padded fortunes: cross-entropy, clipped gradients, Adam.
train::StepReport classify_step(const ClassifyFlags& f, models::BiLstmClassifier& clf, optim::Adam& opt, Device dev,
                                const Tensor& x, const Tensor& y, train::RunningSums& sums) {
  Tensor yd = y.to(dev), logits, loss;
  train::Precision& prec = train::run_precision();
  {
    std::optional<autocast> amp;  // --precision bf16/fp16: the forward and the loss
    prec.enter_autocast(amp, dev);
    logits = clf.forward(x.to(dev), data::padded_lengths(x));
    loss = cross_entropy(logits, yd);
  }
  opt.zero_grad();
  prec.backward(loss);
  if (f.clip > 0) {
    prec.unscale_(opt);  // fp16: clip the true gradients
    nn::utils::clip_grad_norm_(clf.parameters(), f.clip);
  }
  prec.step(opt);
  prec.update();
  sums["loss_sum"] += loss.item() * static_cast<double>(y.numel());
  sums["correct"] += static_cast<double>(sum(eq(argmax(logits.detach(), 1), yd)).item<int64_t>());
  sums["seen"] += static_cast<double>(y.numel());
  return {y.numel(), {{"loss", sums["loss_sum"] / sums["seen"]}, {"acc", sums["correct"] / sums["seen"]}}};
}

// The epoch's summary with the test accuracy per language, and its log row.
void classify_epoch_end(const Classes& k, const train::EpochEnd& e, const Confusion& cm, double test_loss,
                        train::MetricsLog& log) {
  const double seen = e.sums.count("seen") ? e.sums.at("seen") : 0.0;
  const double train_loss = seen ? e.sums.at("loss_sum") / seen : 0.0;
  const double train_acc = seen ? e.sums.at("correct") / seen : 0.0;
  std::printf("%s: train loss %.4f acc %.4f | test loss %.4f acc %.4f (majority %.4f) |", e.title.c_str(), train_loss,
              train_acc, test_loss, cm.accuracy(), k.majority_acc);
  std::map<std::string, double> row{{"epoch", double(e.epoch + 1)},   {"step", double(e.step)},
                                    {"train_loss", train_loss},       {"train_acc", train_acc},
                                    {"test_loss", test_loss},         {"test_acc", cm.accuracy()},
                                    {"majority_acc", k.majority_acc}, {"seconds", e.seconds()}};
  for (size_t c = 0; c < k.names.size(); ++c) {
    std::printf(" %s %.4f", k.names[c].c_str(), cm.class_accuracy(c));
    row["test_acc_" + k.names[c]] = cm.class_accuracy(c);
  }
  std::printf(" | %.1f s\n", e.seconds());
  std::fflush(stdout);
  log.row(row);
}

void print_confusion(const Classes& k, const Confusion& cm) {
  std::printf("Confusion matrix on the test set (rows: true language, columns: predicted):\n%8s", "");
  for (const auto& n : k.names) std::printf(" %7s", n.c_str());
  std::printf(" | accuracy\n");
  for (size_t c = 0; c < k.names.size(); ++c) {
    std::printf("%8s", k.names[c].c_str());
    for (int64_t v : cm.m[c]) std::printf(" %7lld", (long long)v);
    std::printf(" | %.4f\n", cm.class_accuracy(c));
  }
}

int train_classifier(const ClassifyFlags& f, const Classes& k, const data::Vocabulary& vocab,
                     const data::LabelledTextDataset& train_set, const data::LabelledTextDataset& test_set,
                     Device dev) {
  const auto K = static_cast<int64_t>(k.names.size());
  manual_seed(static_cast<uint64_t>(f.seed));
  models::BiLstmClassifier clf(
      {.vocab_size = vocab.size(), .embed_dim = f.embed, .hidden = f.hidden, .classes = K, .padding_idx = 0});
  clf.to(dev);
  optim::Adam opt(clf.parameters(), {.lr = f.lr});
  data::DataLoader loader(train_set, {.batch_size = f.batch,
                                      .shuffle = true,
                                      .workers = static_cast<int>(f.workers),
                                      .seed = static_cast<uint64_t>(f.seed)});
  std::string classes;
  for (const auto& n : k.names) classes += (classes.empty() ? "" : ",") + n;
  std::vector<std::string> columns{"epoch",     "step",     "train_loss",   "train_acc",
                                   "test_loss", "test_acc", "majority_acc", "seconds"};
  for (const auto& n : k.names) columns.push_back("test_acc_" + n);
  train::Trainer trainer({.epochs = f.epochs,
                          .max_steps = f.max_steps,
                          .checkpoint_dir = f.ckpt_dir,
                          .resume = f.resume,
                          .log = f.log_path,
                          .overwrite = f.overwrite,
                          .columns = columns,
                          .tensorboard = f.tensorboard,
                          .init = f.init},
                         {&clf, {&opt}, {{"default", &default_generator()}}}, loader,
                         {{"model", "BiLstmClassifier"},
                          {"classes", classes},
                          {"level", f.level},
                          {"flag.lr", train::exact_number(f.lr)},
                          {"flag.seed", std::to_string(f.seed)},
                          {"flag.batch-size", std::to_string(f.batch)},
                          {"flag.precision", f.precision}});
  train::prepare_output_dir("checkpoint-dir", f.ckpt_dir, f.resume.empty(), f.overwrite);
  if (const auto path = trainer.weights_path();
      path && !train::vocabulary_matches_checkpoint(
                  vocab, *path, "bilstm_classify",
                  "--data, --languages, --level, --min-freq, --min-length, --balance, --limit and --split-seed"))
    return 1;
  trainer.resume();
  if (!f.ckpt_dir.empty()) vocab.save((fs::path(f.ckpt_dir) / "vocab.txt").string());
  print_start(f, k, vocab.size(), dev);
  // Its forward takes the tokens and their lengths: the summary runs it on one full-length fortune.
  const Tensor one = zeros({1, f.max_len}, {.dtype = DType::Int64, .device = dev});
  std::printf("%s", clf.summary("tokens [1, " + std::to_string(f.max_len) + "] and their length",
                                [&] { clf.forward(one, {f.max_len}); })
                        .c_str());
  Confusion last(K);
  auto end_epoch = [&](const train::EpochEnd& e) {
    auto [cm, test_loss] = evaluate(clf, test_set, dev, 128);
    last = cm;
    classify_epoch_end(k, e, cm, test_loss, trainer.log());
  };
  auto done = [&] {
    if (last.total() > 0) print_confusion(k, last);
    if (!f.ckpt_dir.empty()) save(clf, (fs::path(f.ckpt_dir) / "bilstm_classify.ckpt").string());
  };
  return trainer.fit({.step = [&](const Tensor& x, const Tensor& y,
                                  train::RunningSums& sums) { return classify_step(f, clf, opt, dev, x, y, sums); },
                      .end_epoch = end_epoch},
                     done);
}

// Reads the languages, splits them, builds the vocabulary and the datasets, then trains.
int run(const ClassifyFlags& f, train::Flags& flags, Device dev) {
  Classes k;
  std::vector<std::vector<std::string>> per_class;
  read_languages(f, flags, k.names, per_class);
  const auto K = static_cast<int64_t>(k.names.size());
  Split split = split_languages(f, per_class);
  const data::TokenizerOptions tok{.level = f.level == "char" ? data::TokenLevel::Char : data::TokenLevel::Word};
  data::Vocabulary vocab = data::Vocabulary::build(
      split.train_texts, tok, {.min_freq = f.min_freq > 0 ? f.min_freq : (f.level == "char" ? 5 : 3)});
  data::LabelledTextDataset train_set(split.train, vocab, K, f.max_len), test_set(split.test, vocab, K, f.max_len);
  k.train_counts = train_set.class_counts(), k.test_counts = test_set.class_counts();
  k.majority =
      static_cast<size_t>(std::max_element(k.train_counts.begin(), k.train_counts.end()) - k.train_counts.begin());
  k.majority_acc = static_cast<double>(k.test_counts[k.majority]) / static_cast<double>(test_set.size());
  return train_classifier(f, k, vocab, train_set, test_set, dev);
}

}  // namespace

int main(int argc, char** argv) {
  train::Flags flags(
      argc, argv,
      "Trains a BiLSTM classifier to tell the language of a fortune cookie (English, German, Italian,\n"
      "Spanish: Debian's fortunes, fortunes-de, fortunes-it, fortunes-es) and reports per-language test\n"
      "accuracy beside the majority-class baseline. Example: bilstm_classify --epochs 3");
  const ClassifyFlags f(flags);
  flags.finish();
  f.check(flags);
  train::run_precision() = train::Precision::parse(f.precision);
  try {
    if (f.threads > 0) set_num_threads(static_cast<int>(f.threads));
    return run(f, flags, f.device == "auto" ? Device::best() : Device(f.device));
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    return train::report_failure("bilstm_classify", e);
  }
}
