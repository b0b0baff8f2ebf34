// Trains an LSTM language model (models/lstm.h) on fortune cookies: Debian's English `fortunes`
// by default, character- or word-level. Fortunes are de-duplicated and split into training and
// held-out sets by document; the vocabulary comes from the training set only. After each epoch it
// reports the held-out perplexity beside a unigram model's on the very same held-out tokens (the
// baseline a language model must beat) and prints a generated fortune. Progress bar, CSV metrics
// log, checkpoints that resume exactly; SIGTERM/SIGINT write a checkpoint and exit with status 75.
#include <cmath>
#include <cstdio>
#include <filesystem>

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
#include "models/text_generator.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Mean next-token cross-entropy and accuracy over every target of `ds` (each sequence starts from
// a zero state).
EvalResult evaluate(models::LstmLanguageModel& lm, const data::Dataset& ds, Device dev, int64_t batch) {
  NoGradGuard ng;
  const bool was_training = lm.is_training();
  lm.eval();
  data::DataLoader loader(ds, {.batch_size = batch, .shuffle = false});
  double loss_sum = 0;
  int64_t correct = 0, total = 0;
  for (auto& [x, y] : loader) {
    Tensor logits = lm(x.to(dev));
    const int64_t n = y.numel();
    Tensor flat = logits.reshape({n, logits.size(2)});
    Tensor yd = y.to(dev).reshape({n});
    loss_sum += cross_entropy(flat, yd, {.reduction = Reduction::Sum}).item();
    correct += sum(eq(argmax(flat, 1), yd)).item<int64_t>();
    total += n;
  }
  lm.train(was_training);
  return {total ? loss_sum / static_cast<double>(total) : 0.0,
          total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0};
}

// Generated token ids as text, with <eos> shown as fortune's "%" separator line.
std::string render(const data::Vocabulary& vocab, const std::vector<int64_t>& ids) {
  std::string out;
  std::vector<int64_t> piece;
  for (int64_t id : ids) {
    if (id == data::Vocabulary::kEos) {
      out += vocab.decode(piece) + "\n%";
      piece.clear();
    } else {
      piece.push_back(id);
    }
  }
  return out + vocab.decode(piece);
}

}  // namespace

int main(int argc, char** argv) {
  examples::Flags flags(argc, argv,
                        "Trains an LSTM language model (Embedding -> LSTM -> Linear) on fortune cookies and prints\n"
                        "generated text and held-out perplexity (beside a unigram baseline) after each epoch.\n"
                        "Example: lstm_lm --epochs 5 --level char --checkpoint-dir ckpt_lm");
  std::string data_dir = flags.str("data", "/usr/share/games/fortunes",
                                   "a fortune file or a folder of them (Debian's `fortunes` package)");
  std::string level = flags.str("level", "char", "tokens: char or word");
  int64_t epochs = flags.integer_min("epochs", 10, 1, "passes over the training set");
  int64_t batch = flags.integer_min("batch-size", 32, 1, "sequences per step");
  int64_t seq_len = flags.integer_min("seq-len", 100, 1, "tokens per training sequence (backpropagation through time)");
  double lr = flags.positive("lr", 2e-3, "Adam learning rate");
  double clip = flags.real("clip", 1.0, "clip the gradient norm to this (0: no clipping)");
  int64_t embed = flags.integer_min("embed", 64, 1, "embedding size");
  int64_t hidden = flags.integer_min("hidden", 256, 1, "LSTM hidden size");
  int64_t layers = flags.integer_min("layers", 1, 1, "LSTM layers");
  double dropout = flags.real("dropout", 0.0, "dropout between LSTM layers");
  int64_t min_freq = flags.integer("min-freq", 0, "keep tokens seen this often (0: 2 for char, 3 for word)");
  int64_t max_vocab = flags.integer("max-vocab", 10000, "vocabulary size limit, specials included (0: none)");
  bool lowercase = flags.boolean("lowercase", false, "lower-case the text first");
  double test_fraction =
      flags.real_between("test-fraction", 0.1, 0, 1, "share of the fortunes held out for evaluation");
  int64_t split_seed = flags.integer("split-seed", 1234, "seed of the train/held-out split (kept apart from --seed)");
  int64_t limit = flags.count_or_none("limit", 1, "all", "use only the first N fortunes");
  int64_t seed = flags.integer("seed", 0, "seed for weights, shuffling and sampling");
  std::string device = flags.device("device", "auto", "auto, cpu, cuda or cuda:N");
  std::string ckpt_dir =
      flags.str("checkpoint-dir", "", "write a checkpoint (and the vocabulary) here after every epoch");
  std::string resume = flags.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
  bool overwrite = flags.boolean("overwrite", false, "start afresh in a checkpoint-dir that holds a checkpoint");
  int64_t max_steps = flags.count_or_none("max-steps", 0, "no limit", "stop after this many optimizer steps in total");
  int64_t sample_len = flags.integer("sample-length", 400, "tokens to generate after each epoch (0: none)");
  double temperature = flags.real("temperature", 0.8, "sampling temperature (0: greedy)");
  int64_t top_k = flags.integer("top-k", 0, "sample among the k most likely tokens (0: all)");
  int64_t workers = flags.integer_in("workers", 0, 0, examples::kMaxWorkers, "data-loader worker threads");
  int64_t threads = flags.integer_in("threads", 0, 0, examples::kMaxThreads, "CPU threads for the math (0: all cores)");
  std::string log_path = flags.str("log", "", "append per-epoch metrics to this CSV file");
  flags.finish();
  if (level != "char" && level != "word") flags.fail("--level must be char or word, got '" + level + "'");
  if (resume == "auto" && ckpt_dir.empty()) flags.fail("--resume auto needs --checkpoint-dir");
  if (layers > 64) flags.fail("--layers must be at most 64, got " + std::to_string(layers));
  if (temperature < 0) flags.fail("--temperature must be >= 0 (0: greedy)");
  if (clip < 0 || dropout < 0 || dropout >= 1 || min_freq < 0 || max_vocab < 0 || sample_len < 0 || top_k < 0)
    flags.fail(
        "--clip, --min-freq, --max-vocab, --sample-length and --top-k must not be "
        "negative; --dropout must be in [0, 1)");

  try {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
    Device dev = device == "auto" ? Device::best() : Device(device);

    // Corpus: unique fortunes, split by document.
    std::vector<std::string> docs = data::unique_texts(data::read_fortunes(data_dir));
    if (limit > 0 && static_cast<int64_t>(docs.size()) > limit) docs.resize(static_cast<size_t>(limit));
    data::SplitIndices split =
        data::split_indices(static_cast<int64_t>(docs.size()), test_fraction, static_cast<uint64_t>(split_seed));
    std::vector<std::string> train_docs, test_docs;
    for (int64_t i : split.train) train_docs.push_back(docs[static_cast<size_t>(i)]);
    for (int64_t i : split.test) test_docs.push_back(docs[static_cast<size_t>(i)]);
    const data::TokenizerOptions tok{.level = level == "char" ? data::TokenLevel::Char : data::TokenLevel::Word,
                                     .lowercase = lowercase};
    data::Vocabulary vocab = data::Vocabulary::build(
        train_docs, tok, {.min_freq = min_freq > 0 ? min_freq : (level == "char" ? 2 : 3), .max_size = max_vocab});
    std::vector<int64_t> train_ids = data::encode_documents(vocab, train_docs);
    std::vector<int64_t> test_ids = data::encode_documents(vocab, test_docs);
    data::LanguageModelDataset train_set(train_ids, seq_len), test_set(test_ids, seq_len);
    const std::vector<int64_t> scored = test_set.targets();
    const double unigram_ppl = data::unigram_perplexity(train_ids, scored, vocab.size());
    int64_t test_unk = 0;
    for (int64_t t : scored) test_unk += t == data::Vocabulary::kUnk;

    manual_seed(static_cast<uint64_t>(seed));
    models::LstmLanguageModel lm(
        {.vocab_size = vocab.size(), .embed_dim = embed, .hidden = hidden, .layers = layers, .dropout = dropout});
    lm.to(dev);
    optim::Adam opt(lm.parameters(), {.lr = lr});
    data::DataLoader loader(train_set, {.batch_size = batch,
                                        .shuffle = true,
                                        .workers = static_cast<int>(workers),
                                        .seed = static_cast<uint64_t>(seed)});
    examples::Checkpointer ckpt(ckpt_dir, {&lm, {&opt}, {{"default", &default_generator()}}}, loader,
                                {{"model", "LstmLanguageModel"},
                                 {"level", level},
                                 {"vocab_size", std::to_string(vocab.size())},
                                 {"flag.lr", examples::exact_number(lr)},
                                 {"flag.seed", std::to_string(seed)},
                                 {"flag.batch-size", std::to_string(batch)},
                                 {"flag.seq-len", std::to_string(seq_len)}});
    examples::prepare_output_dir(flags, "checkpoint-dir", ckpt_dir, resume.empty(), overwrite);
    if (const auto path = ckpt.resume_path(resume);
        path &&
        !examples::vocabulary_matches_checkpoint(
            vocab, *path, "lstm_lm", "--data, --level, --lowercase, --min-freq, --max-vocab, --limit and --split-seed"))
      return 1;
    TrainingPosition pos = ckpt.resume(resume);
    if (!ckpt_dir.empty()) vocab.save((fs::path(ckpt_dir) / "vocab.txt").string());
    examples::install_stop_handlers();

    std::printf("Corpus %s: %zu unique fortunes -> %zu training (%zu tokens), %zu held out (%zu tokens)\n",
                data_dir.c_str(), docs.size(), train_docs.size(), train_ids.size(), test_docs.size(), test_ids.size());
    std::printf("Vocabulary: %lld %s tokens (<unk> covers %.2f%% of the held-out targets)\n", (long long)vocab.size(),
                level.c_str(), 100.0 * static_cast<double>(test_unk) / static_cast<double>(scored.size()));
    std::printf("Unigram baseline on the %zu held-out targets: perplexity %.3f\n", scored.size(), unigram_ppl);
    std::printf(
        "Training LstmLanguageModel (embed %lld, hidden %lld, %lld layer%s, %lld parameters) on %s: %lld "
        "epochs, batch %lld x %lld tokens, Adam lr %g\n",
        (long long)embed, (long long)hidden, (long long)layers, layers > 1 ? "s" : "",
        (long long)[&] {
          int64_t n = 0;
          for (const auto& p : lm.parameters()) n += p.numel();
          return n;
        }(),
        examples::device_label(dev).c_str(), (long long)epochs, (long long)batch, (long long)seq_len, lr);

    if (examples::reached_max_steps(pos.step, max_steps)) return 0;
    examples::MetricsLog log(
        log_path,
        {"epoch", "step", "train_loss", "train_ppl", "test_loss", "test_ppl", "test_acc", "unigram_ppl", "seconds"},
        examples::rows_to_keep(ckpt.resumed(), pos, /*per_epoch=*/true, log_path, ckpt_dir));
    models::TextGenerator sampler(lm,
                                  {.temperature = temperature, .top_k = top_k, .seed = static_cast<uint64_t>(seed)});
    for (; pos.epoch < epochs; ++pos.epoch) {
      examples::ProgressBar bar("epoch " + std::to_string(pos.epoch + 1) + "/" + std::to_string(epochs),
                                loader.batches_per_epoch(), epochs - pos.epoch - 1);
      // A resumed epoch goes on from its checkpoint's sums.
      examples::RunningSums r = ckpt.take_running();
      double loss_sum = r["loss_sum"];
      int64_t seen = static_cast<int64_t>(r["seen"]), correct = static_cast<int64_t>(r["correct"]);
      const int64_t seen_before = seen;
      auto sums = [&]() -> examples::RunningSums {
        return {{"loss_sum", loss_sum}, {"correct", double(correct)}, {"seen", double(seen)}};
      };
      bool cut_short = false;
      for (auto& [x, y] : loader) {
        Tensor logits = lm(x.to(dev));
        const int64_t n = y.numel();
        Tensor flat = logits.reshape({n, vocab.size()});
        Tensor yd = y.to(dev).reshape({n});
        Tensor loss = cross_entropy(flat, yd);
        opt.zero_grad();
        loss.backward();
        if (clip > 0) nn::utils::clip_grad_norm_(lm.parameters(), clip);
        opt.step();
        ++pos.step;
        loss_sum += loss.item() * static_cast<double>(n);
        {
          NoGradGuard ng;
          correct += sum(eq(argmax(flat, 1), yd)).item<int64_t>();
        }
        seen += n;
        const double mean = loss_sum / static_cast<double>(seen);
        bar.update(loader.position().batch, (seen - seen_before) / seq_len,
                   {{"loss", mean}, {"ppl", std::exp(mean)}, {"acc", double(correct) / double(seen)}});
        if (examples::stop_requested()) return ckpt.preempted(pos, sums());
        if (max_steps >= 0 && pos.step >= max_steps && loader.position().batch < loader.batches_per_epoch()) {
          cut_short = true;
          break;
        }
      }
      const int64_t done = loader.position().batch, batches = loader.batches_per_epoch();
      EvalResult ev = evaluate(lm, test_set, dev, 64);
      const double train_loss = seen ? loss_sum / static_cast<double>(seen) : 0.0;
      std::printf(
          "%s: train loss %.4f ppl %.3f | held-out loss %.4f ppl %.3f acc %.4f | unigram ppl %.3f | "
          "%.1f s\n",
          examples::epoch_title(pos.epoch, done > 0 && done < batches, done, batches).c_str(), train_loss,
          std::exp(train_loss), ev.loss, std::exp(ev.loss), ev.accuracy, unigram_ppl, bar.elapsed());
      log.row({{"epoch", double(pos.epoch + 1)},
               {"step", double(pos.step)},
               {"train_loss", train_loss},
               {"train_ppl", std::exp(train_loss)},
               {"test_loss", ev.loss},
               {"test_ppl", std::exp(ev.loss)},
               {"test_acc", ev.accuracy},
               {"unigram_ppl", unigram_ppl},
               {"seconds", bar.elapsed()}});
      if (sample_len > 0) {
        sampler.reseed(static_cast<uint64_t>(seed) * 1000003u + static_cast<uint64_t>(pos.epoch));
        std::vector<int64_t> text = sampler.generate({data::Vocabulary::kEos}, sample_len, data::Vocabulary::kEos);
        std::printf("--- sample (temperature %g%s) ---\n%s\n---\n", temperature,
                    top_k > 0 ? (", top-" + std::to_string(top_k)).c_str() : "", render(vocab, text).c_str());
      }
      std::fflush(stdout);
      ckpt.save(pos, sums());  // the loader's position says where to pick up: mid-epoch or the next epoch
      if (cut_short || (max_steps >= 0 && pos.step >= max_steps)) break;
    }
    if (!ckpt_dir.empty()) save(lm, (fs::path(ckpt_dir) / "lstm_lm.ckpt").string());
    return 0;
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    std::fprintf(stderr, "lstm_lm: %s\n", e.what());
    return 1;
  }
}
