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

#include "common/flags.h"
#include "common/progress.h"
#include "common/training.h"
#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "data/text_datasets.h"
#include "data/vocabulary.h"
#include "layers/checkpoint.h"
#include "models/lstm.h"

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

}  // namespace

int main(int argc, char** argv) {
  examples::Flags flags(
      argc, argv,
      "Trains a BiLSTM classifier to tell the language of a fortune cookie (English, German, Italian,\n"
      "Spanish: Debian's fortunes, fortunes-de, fortunes-it, fortunes-es) and reports per-language test\n"
      "accuracy beside the majority-class baseline. Example: bilstm_classify --epochs 3");
  std::string data_dir = flags.str("data", "/usr/share/games/fortunes", "the fortunes folder");
  std::string languages = flags.str("languages", "en=.,de=de,it=it,es=es",
                                    "comma-separated name=folder (relative to --data) per class; missing folders are "
                                    "skipped");
  std::string level = flags.str("level", "char", "tokens: char or word");
  int64_t epochs = flags.integer_min("epochs", 3, 1, "passes over the training set");
  int64_t batch = flags.integer_min("batch-size", 32, 1, "fortunes per step");
  double lr = flags.positive("lr", 2e-3, "Adam learning rate");
  double clip = flags.real("clip", 1.0, "clip the gradient norm to this (0: no clipping)");
  int64_t embed = flags.integer_min("embed", 32, 1, "embedding size");
  int64_t hidden = flags.integer_min("hidden", 64, 1, "LSTM hidden size per direction");
  int64_t max_len = flags.integer_min("max-len", 128, 1, "keep the first N tokens of a fortune");
  int64_t min_len = flags.integer("min-length", 10, "drop fortunes with fewer characters (after squashing spaces)");
  int64_t min_freq = flags.integer("min-freq", 0, "keep tokens seen this often (0: 5 for char, 3 for word)");
  bool balance = flags.boolean("balance", true, "subsample every language to the smallest one's count");
  int64_t limit = flags.count_or_none("limit", 1, "all", "use at most N fortunes per language");
  double test_fraction = flags.real_between("test-fraction", 0.2, 0, 1, "share of each language held out for testing");
  int64_t split_seed =
      flags.integer("split-seed", 1234, "seed of the subsampling and the split (kept apart from --seed)");
  int64_t seed = flags.integer("seed", 0, "seed for weights and shuffling");
  std::string device = flags.device("device", "auto", "auto, cpu, cuda or cuda:N");
  std::string ckpt_dir =
      flags.str("checkpoint-dir", "", "write a checkpoint (and the vocabulary) here after every epoch");
  std::string resume = flags.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
  bool overwrite = flags.boolean("overwrite", false, "start afresh in a checkpoint-dir that holds a checkpoint");
  int64_t max_steps = flags.count_or_none("max-steps", 0, "no limit", "stop after this many optimizer steps in total");
  int64_t workers = flags.integer_in("workers", 0, 0, examples::kMaxWorkers, "data-loader worker threads");
  int64_t threads = flags.integer_in("threads", 0, 0, examples::kMaxThreads, "CPU threads for the math (0: all cores)");
  std::string log_path = flags.str("log", "", "append per-epoch metrics to this CSV file");
  flags.finish();
  if (level != "char" && level != "word") flags.fail("--level must be char or word, got '" + level + "'");
  if (resume == "auto" && ckpt_dir.empty()) flags.fail("--resume auto needs --checkpoint-dir");
  if (clip < 0 || min_len < 0 || min_freq < 0) flags.fail("--clip, --min-length and --min-freq must not be negative");

  try {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    Device dev = device == "auto" ? Device::best() : Device(device);

    // Classes: every name=folder whose folder exists.
    std::vector<std::string> names;
    std::vector<std::vector<std::string>> per_class;
    std::stringstream ls(languages);
    for (std::string item; std::getline(ls, item, ',');) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
        flags.fail("--languages expects name=folder pairs, got '" + item + "'");
      for (const auto& n : names)
        if (n == item.substr(0, eq)) flags.fail("--languages names '" + n + "' twice");
      const fs::path dir = fs::path(data_dir) / item.substr(eq + 1);
      if (!fs::is_directory(dir)) {
        std::printf("Skipping '%s': no folder %s (install its fortunes-* package).\n", item.substr(0, eq).c_str(),
                    dir.c_str());
        continue;
      }
      std::vector<std::string> texts;
      for (const auto& f : data::unique_texts(data::read_fortunes(dir.string()))) {
        std::string s = squash_spaces(f);
        if (static_cast<int64_t>(data::utf8_chars(s).size()) >= min_len) texts.push_back(std::move(s));
      }
      texts = data::unique_texts(texts);
      if (limit > 0 && static_cast<int64_t>(texts.size()) > limit) texts.resize(static_cast<size_t>(limit));
      if (texts.size() < 2) {
        std::fprintf(stderr, "bilstm_classify: %s has %zu usable fortunes; need at least 2\n", dir.c_str(),
                     texts.size());
        return 1;
      }
      names.push_back(item.substr(0, eq));
      per_class.push_back(std::move(texts));
    }
    if (names.size() < 2) {
      std::fprintf(stderr,
                   "bilstm_classify: need at least two languages, found %zu under %s (scripts/setup.sh "
                   "installs fortunes, fortunes-de, fortunes-it and fortunes-es)\n",
                   names.size(), data_dir.c_str());
      return 1;
    }
    const auto K = static_cast<int64_t>(names.size());
    size_t smallest = per_class[0].size();
    for (const auto& t : per_class) smallest = std::min(smallest, t.size());

    // Balance (seeded subsample), then split each language on its own so that every class keeps
    // the test fraction exactly.
    std::vector<data::LabelledText> train_items, test_items;
    std::vector<std::string> train_texts;
    for (int64_t c = 0; c < K; ++c) {
      std::vector<std::string>& texts = per_class[static_cast<size_t>(c)];
      if (balance && texts.size() > smallest) {
        data::SplitIndices keep = data::split_indices(static_cast<int64_t>(texts.size()),
                                                      static_cast<double>(smallest) / static_cast<double>(texts.size()),
                                                      static_cast<uint64_t>(split_seed + c));
        std::vector<std::string> kept;
        for (int64_t i : keep.test) kept.push_back(texts[static_cast<size_t>(i)]);
        texts = std::move(kept);
      }
      data::SplitIndices s = data::split_indices(static_cast<int64_t>(texts.size()), test_fraction,
                                                 static_cast<uint64_t>(split_seed + 100 + c));
      for (int64_t i : s.train) {
        train_items.push_back({texts[static_cast<size_t>(i)], c});
        train_texts.push_back(texts[static_cast<size_t>(i)]);
      }
      for (int64_t i : s.test) test_items.push_back({texts[static_cast<size_t>(i)], c});
    }
    const data::TokenizerOptions tok{.level = level == "char" ? data::TokenLevel::Char : data::TokenLevel::Word};
    data::Vocabulary vocab =
        data::Vocabulary::build(train_texts, tok, {.min_freq = min_freq > 0 ? min_freq : (level == "char" ? 5 : 3)});
    data::LabelledTextDataset train_set(train_items, vocab, K, max_len), test_set(test_items, vocab, K, max_len);
    const std::vector<int64_t> train_counts = train_set.class_counts(), test_counts = test_set.class_counts();
    const auto majority =
        static_cast<size_t>(std::max_element(train_counts.begin(), train_counts.end()) - train_counts.begin());
    const double majority_acc = static_cast<double>(test_counts[majority]) / static_cast<double>(test_set.size());

    manual_seed(static_cast<uint64_t>(seed));
    models::BiLstmClassifier clf(
        {.vocab_size = vocab.size(), .embed_dim = embed, .hidden = hidden, .classes = K, .padding_idx = 0});
    clf.to(dev);
    optim::Adam opt(clf.parameters(), {.lr = lr});
    data::DataLoader loader(train_set, {.batch_size = batch,
                                        .shuffle = true,
                                        .workers = static_cast<int>(workers),
                                        .seed = static_cast<uint64_t>(seed)});
    std::string classes;
    for (const auto& n : names) classes += (classes.empty() ? "" : ",") + n;
    examples::Checkpointer ckpt(ckpt_dir, {&clf, {&opt}, {{"default", &default_generator()}}}, loader,
                                {{"model", "BiLstmClassifier"},
                                 {"classes", classes},
                                 {"level", level},
                                 {"flag.lr", examples::exact_number(lr)},
                                 {"flag.seed", std::to_string(seed)},
                                 {"flag.batch-size", std::to_string(batch)}});
    examples::prepare_output_dir(flags, "checkpoint-dir", ckpt_dir, resume.empty(), overwrite);
    if (const auto path = ckpt.resume_path(resume);
        path && !examples::vocabulary_matches_checkpoint(
                    vocab, *path, "bilstm_classify",
                    "--data, --languages, --level, --min-freq, --min-length, --balance, --limit and --split-seed"))
      return 1;
    TrainingPosition pos = ckpt.resume(resume);
    if (!ckpt_dir.empty()) vocab.save((fs::path(ckpt_dir) / "vocab.txt").string());
    examples::install_stop_handlers();

    std::printf("Languages (training / test fortunes%s):", balance ? ", balanced" : "");
    for (int64_t c = 0; c < K; ++c)
      std::printf(" %s %lld/%lld", names[static_cast<size_t>(c)].c_str(),
                  (long long)train_counts[static_cast<size_t>(c)], (long long)test_counts[static_cast<size_t>(c)]);
    std::printf("\nVocabulary: %lld %s tokens; fortunes cut to %lld tokens\n", (long long)vocab.size(), level.c_str(),
                (long long)max_len);
    std::printf("Majority-class baseline (always '%s'): test accuracy %.4f\n", names[majority].c_str(), majority_acc);
    std::printf("Training BiLstmClassifier (embed %lld, hidden %lld x 2) on %s: %lld epochs, batch %lld, Adam lr %g\n",
                (long long)embed, (long long)hidden, examples::device_label(dev).c_str(), (long long)epochs,
                (long long)batch, lr);

    std::vector<std::string> columns{"epoch",     "step",     "train_loss",   "train_acc",
                                     "test_loss", "test_acc", "majority_acc", "seconds"};
    for (const auto& n : names) columns.push_back("test_acc_" + n);
    if (examples::reached_max_steps(pos.step, max_steps)) return 0;
    examples::MetricsLog log(log_path, columns,
                             examples::rows_to_keep(ckpt.resumed(), pos, /*per_epoch=*/true, log_path, ckpt_dir));
    Confusion last(K);
    for (; pos.epoch < epochs; ++pos.epoch) {
      examples::ProgressBar bar("epoch " + std::to_string(pos.epoch + 1) + "/" + std::to_string(epochs),
                                loader.batches_per_epoch(), epochs - pos.epoch - 1);
      // A resumed epoch goes on from its checkpoint's sums.
      examples::RunningSums r = ckpt.take_running();
      double loss_sum = r["loss_sum"];
      int64_t correct = static_cast<int64_t>(r["correct"]), seen = static_cast<int64_t>(r["seen"]);
      const int64_t seen_before = seen;
      auto sums = [&]() -> examples::RunningSums {
        return {{"loss_sum", loss_sum}, {"correct", double(correct)}, {"seen", double(seen)}};
      };
      bool cut_short = false;
      for (auto& [x, y] : loader) {
        Tensor yd = y.to(dev);
        Tensor logits = clf.forward(x.to(dev), data::padded_lengths(x));
        Tensor loss = cross_entropy(logits, yd);
        opt.zero_grad();
        loss.backward();
        if (clip > 0) nn::utils::clip_grad_norm_(clf.parameters(), clip);
        opt.step();
        ++pos.step;
        loss_sum += loss.item() * static_cast<double>(y.numel());
        {
          NoGradGuard ng;
          correct += sum(eq(argmax(logits, 1), yd)).item<int64_t>();
        }
        seen += y.numel();
        bar.update(loader.position().batch, seen - seen_before,
                   {{"loss", loss_sum / static_cast<double>(seen)}, {"acc", double(correct) / double(seen)}});
        if (examples::stop_requested()) return ckpt.preempted(pos, sums());
        if (max_steps >= 0 && pos.step >= max_steps && loader.position().batch < loader.batches_per_epoch()) {
          cut_short = true;
          break;
        }
      }
      const int64_t done = loader.position().batch, batches = loader.batches_per_epoch();
      auto [cm, tloss] = evaluate(clf, test_set, dev, 128);
      last = cm;
      const double train_loss = seen ? loss_sum / static_cast<double>(seen) : 0.0;
      const double train_acc = seen ? static_cast<double>(correct) / static_cast<double>(seen) : 0.0;
      std::printf("%s: train loss %.4f acc %.4f | test loss %.4f acc %.4f (majority %.4f) |",
                  examples::epoch_title(pos.epoch, done > 0 && done < batches, done, batches).c_str(), train_loss,
                  train_acc, tloss, cm.accuracy(), majority_acc);
      std::map<std::string, double> row{
          {"epoch", double(pos.epoch + 1)}, {"step", double(pos.step)}, {"train_loss", train_loss},
          {"train_acc", train_acc},         {"test_loss", tloss},       {"test_acc", cm.accuracy()},
          {"majority_acc", majority_acc},   {"seconds", bar.elapsed()}};
      for (int64_t c = 0; c < K; ++c) {
        std::printf(" %s %.4f", names[static_cast<size_t>(c)].c_str(), cm.class_accuracy(static_cast<size_t>(c)));
        row["test_acc_" + names[static_cast<size_t>(c)]] = cm.class_accuracy(static_cast<size_t>(c));
      }
      std::printf(" | %.1f s\n", bar.elapsed());
      std::fflush(stdout);
      log.row(row);
      ckpt.save(pos, sums());  // the loader's position says where to pick up: mid-epoch or the next epoch
      if (cut_short || (max_steps >= 0 && pos.step >= max_steps)) break;
    }
    if (last.total() > 0) {
      std::printf("Confusion matrix on the test set (rows: true language, columns: predicted):\n%8s", "");
      for (const auto& n : names) std::printf(" %7s", n.c_str());
      std::printf(" | accuracy\n");
      for (int64_t c = 0; c < K; ++c) {
        std::printf("%8s", names[static_cast<size_t>(c)].c_str());
        for (int64_t v : last.m[static_cast<size_t>(c)]) std::printf(" %7lld", (long long)v);
        std::printf(" | %.4f\n", last.class_accuracy(static_cast<size_t>(c)));
      }
    }
    if (!ckpt_dir.empty()) save(clf, (fs::path(ckpt_dir) / "bilstm_classify.ckpt").string());
    return 0;
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    std::fprintf(stderr, "bilstm_classify: %s\n", e.what());
    return 1;
  }
}
