// Trains an LSTM language model (models/lstm.h) on fortune cookies: Debian's English `fortunes`
// by default, character- or word-level. Fortunes are de-duplicated and split into training and
// held-out sets by document; the vocabulary comes from the training set only. After each epoch it
// reports the held-out perplexity beside a unigram model's on the very same held-out tokens (the
// baseline a language model must beat) and prints a generated fortune. Progress bar, CSV metrics
// log, checkpoints that resume exactly; SIGTERM/SIGINT write a checkpoint and exit with status 75.
//
// Under `ember launch -n N` it trains data-parallel (--data-parallel) or as a pipeline
// (--pipeline K: the model as its layers, embedding, one stage element per LSTM layer, the output
// layer, cut into K stages; N/K replicas), as mnist_cnn does (train/parallel_job.h);
// the gradient's norm is clipped over the whole model, every stage's part of it included.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/parallel.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "data/text_datasets.h"
#include "data/vocabulary.h"
#include "layers/checkpoint.h"
#include "models/lstm.h"
#include "models/text_generator.h"
#include "train/accumulate.h"
#include "train/flags.h"
#include "train/language_model.h"
#include "train/parallel_job.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "train/training.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

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

// The flags, in the order --help lists them, and what they must satisfy.
struct LmFlags {
  std::string data_dir, level, device, ckpt_dir, resume, log_path, precision;
  train::TensorBoardFlags tensorboard;
  train::InitFrom init;  // --init-from, --init-skip
  int64_t epochs, batch, seq_len, embed, hidden, layers, min_freq, max_vocab, split_seed, limit, seed, max_steps,
      checkpoint_every, sample_len, top_k, workers, threads, accumulate;
  double lr, clip, dropout, test_fraction, temperature;
  bool lowercase, overwrite;

  explicit LmFlags(train::Flags& flags) {
    data_dir = flags.str("data", "/usr/share/games/fortunes",
                         "a fortune file or a folder of them (Debian's `fortunes` package)");
    level = flags.str("level", "char", "tokens: char or word");
    epochs = flags.integer_min("epochs", 10, 1, "passes over the training set");
    batch = flags.integer_min("batch-size", 32, 1, "sequences per step");
    accumulate = train::accumulate_flag(flags);
    seq_len = flags.integer_min("seq-len", 100, 1, "tokens per training sequence (backpropagation through time)");
    lr = flags.positive("lr", 2e-3, "Adam learning rate");
    clip = flags.real("clip", 1.0, "clip the gradient norm to this (0: no clipping)");
    embed = flags.integer_min("embed", 64, 1, "embedding size");
    hidden = flags.integer_min("hidden", 256, 1, "LSTM hidden size");
    layers = flags.integer_min("layers", 1, 1, "LSTM layers");
    dropout = flags.real("dropout", 0.0, "dropout between LSTM layers");
    min_freq = flags.integer("min-freq", 0, "keep tokens seen this often (0: 2 for char, 3 for word)");
    max_vocab = flags.integer("max-vocab", 10000, "vocabulary size limit, specials included (0: none)");
    lowercase = flags.boolean("lowercase", false, "lower-case the text first");
    test_fraction = flags.real_between("test-fraction", 0.1, 0, 1, "share of the fortunes held out for evaluation");
    split_seed = flags.integer("split-seed", 1234, "seed of the train/held-out split (kept apart from --seed)");
    limit = flags.count_or_none("limit", 1, "all", "use only the first N fortunes");
    seed = flags.integer("seed", 0, "seed for weights, shuffling and sampling");
    device = flags.device("device", "auto", "auto, cpu, cuda or cuda:N");
    ckpt_dir = flags.str("checkpoint-dir", "", "write a checkpoint (and the vocabulary) here after every epoch");
    resume = flags.str("resume", "", "checkpoint to resume from, or 'auto' for checkpoint-dir/last.ckpt");
    overwrite = flags.boolean(
        "overwrite", false, "start afresh in a checkpoint-dir that holds a checkpoint, and in a --log that holds rows");
    max_steps = flags.count_or_none("max-steps", 0, "no limit", "stop after this many optimizer steps in total");
    checkpoint_every = train::checkpoint_every_flag(flags);
    sample_len = flags.integer("sample-length", 400, "tokens to generate after each epoch (0: none)");
    temperature = flags.real("temperature", 0.8, "sampling temperature (0: greedy)");
    top_k = flags.integer("top-k", 0, "sample among the k most likely tokens (0: all)");
    workers = flags.integer_in("workers", 0, 0, train::kMaxWorkers, "data-loader worker threads");
    threads = flags.integer_in("threads", 0, 0, train::kMaxThreads, "CPU threads for the math (0: all cores)");
    log_path = flags.str(
        "log", "",
        "per-epoch metrics to this CSV file (a resumed run appends; a fresh one needs --overwrite if it holds rows)");
    tensorboard = train::TensorBoardFlags(flags);
    init = train::InitFrom(flags);
    precision = flags.str("precision", "fp32",
                          "fp32, bf16 (the LSTM's and the output layer's GEMMs in bfloat16 under autocast) or fp16 "
                          "(float16 with loss scaling); docs/PRECISION.md");
  }
  // Usage errors the flag parser cannot see (exit status 2).
  void check(train::Flags& flags) const {
    if (level != "char" && level != "word") flags.fail("--level must be char or word, got '" + level + "'");
    if (precision != "fp32" && precision != "bf16" && precision != "fp16")
      flags.fail("--precision must be fp32, bf16 or fp16, got '" + precision + "'");
    if (resume == "auto" && ckpt_dir.empty()) flags.fail("--resume auto needs --checkpoint-dir");
    init.check(flags, resume);
    train::run_accumulation() = accumulate;
    if (layers > 64) flags.fail("--layers must be at most 64, got " + std::to_string(layers));
    if (temperature < 0) flags.fail("--temperature must be >= 0 (0: greedy)");
    if (clip < 0 || dropout < 0 || dropout >= 1 || min_freq < 0 || max_vocab < 0 || sample_len < 0 || top_k < 0)
      flags.fail(
          "--clip, --min-freq, --max-vocab, --sample-length and --top-k must not be "
          "negative; --dropout must be in [0, 1)");
  }
};

void print_start(const LmFlags& f, const train::Corpus& c, models::LstmLanguageModel& lm, Device dev) {
  std::printf("Corpus %s: %zu unique fortunes -> %zu training (%zu tokens), %zu held out (%zu tokens)\n",
              f.data_dir.c_str(), c.docs, c.train_docs, c.train_ids.size(), c.test_docs, c.test_ids.size());
  std::printf("Vocabulary: %lld %s tokens (<unk> covers %.2f%% of the held-out targets)\n", (long long)c.vocab.size(),
              f.level.c_str(), 100.0 * static_cast<double>(c.test_unk) / static_cast<double>(c.scored.size()));
  std::printf("Unigram baseline on the %zu held-out targets: perplexity %.3f\n", c.scored.size(), c.unigram_ppl);
  std::printf(
      "Training LstmLanguageModel (embed %lld, hidden %lld, %lld layer%s, %lld parameters) on %s: %lld "
      "epochs, batch %lld x %lld tokens, Adam lr %g\n",
      (long long)f.embed, (long long)f.hidden, (long long)f.layers, f.layers > 1 ? "s" : "",
      (long long)lm.num_parameters(), train::device_label(dev).c_str(), (long long)f.epochs, (long long)f.batch,
      (long long)f.seq_len, f.lr);
  // Through its layers as a Sequential: each one (the LSTM too) is called as a layer and gets its row.
  std::printf("%s", lm.as_sequential()->summary({1, f.seq_len}, DType::Int64).c_str());
}

// The epoch's summary against the unigram baseline, its log row, and a generated fortune.
// The epoch's summary and log row, and a generated fortune.
void lm_epoch_end(const LmFlags& f, const train::Corpus& c, const train::EpochEnd& e, const train::EvalResult& ev,
                  models::TextGenerator& sampler, train::MetricsLog& log) {
  train::lm_summary(c, e, ev, log);
  if (f.sample_len > 0) {
    sampler.reseed(static_cast<uint64_t>(f.seed) * 1000003u + static_cast<uint64_t>(e.epoch));
    std::vector<int64_t> text = sampler.generate({data::Vocabulary::kEos}, f.sample_len, data::Vocabulary::kEos);
    std::printf("--- sample (temperature %g%s) ---\n%s\n---\n", f.temperature,
                f.top_k > 0 ? (", top-" + std::to_string(f.top_k)).c_str() : "", render(c.vocab, text).c_str());
  }
  std::fflush(stdout);
}

int train_lm(const LmFlags& f, train::Corpus& c, Device dev, train::ParallelJob& job) {
  data::LanguageModelDataset train_set(c.train_ids, f.seq_len), test_set(c.test_ids, f.seq_len);
  train::score_baseline(c, test_set);
  manual_seed(static_cast<uint64_t>(f.seed));
  models::LstmLanguageModel lm({.vocab_size = c.vocab.size(),
                                .embed_dim = f.embed,
                                .hidden = f.hidden,
                                .layers = f.layers,
                                .dropout = f.dropout});
  lm.to(dev);
  // What is trained, and what a pipeline cuts: the model's layers, sharing its parameters, in
  // every mode, so that checkpoints name the same tensors whether one process, data-parallel ranks
  // or pipeline stages wrote them, and each resumes the others' (--reshard). The sampler, the
  // evaluation and the model file use the model itself (on rank 0, after a pipeline's stages'
  // weights are gathered into it).
  std::shared_ptr<nn::Sequential> layers = lm.as_sequential();
  nn::Module& net = *layers;
  job.wrap(net, f.batch, static_cast<uint64_t>(f.seed), {f.seq_len}, DType::Int64);  // no-op in one process
  const std::vector<Tensor> params = job.parameters(net);
  optim::Adam opt(params, {.lr = f.lr});
  data::DataLoader loader(train_set, job.loader_options({.batch_size = f.batch,
                                                         .shuffle = true,
                                                         .workers = static_cast<int>(f.workers),
                                                         .seed = static_cast<uint64_t>(f.seed)}));
  train::Trainer trainer({.epochs = f.epochs,
                          .max_steps = f.max_steps,
                          .checkpoint_every = f.checkpoint_every,
                          .checkpoint_dir = f.ckpt_dir,
                          .resume = f.resume,
                          .log = f.log_path,
                          .overwrite = f.overwrite,
                          .columns = train::lm_columns(),
                          .tensorboard = f.tensorboard,
                          .init = f.init},
                         {&net, {&opt}, {{"default", &default_generator()}}}, loader,
                         {{"model", "LstmLanguageModel"},
                          {"level", f.level},
                          {"vocab_size", std::to_string(c.vocab.size())},
                          {"flag.lr", train::exact_number(f.lr)},
                          {"flag.seed", std::to_string(f.seed)},
                          {"flag.batch-size", std::to_string(f.batch)},
                          {"flag.seq-len", std::to_string(f.seq_len)},
                          {"flag.precision", f.precision}},
                         &job);
  train::prepare_output_dir("checkpoint-dir", f.ckpt_dir, f.resume.empty(), f.overwrite);
  if (const auto path = trainer.weights_path();
      path &&
      !train::vocabulary_matches_checkpoint(
          c.vocab, *path, "lstm_lm", "--data, --level, --lowercase, --min-freq, --max-vocab, --limit and --split-seed"))
    return 1;
  trainer.resume();
  if (!f.ckpt_dir.empty() && job.chatty()) c.vocab.save((fs::path(f.ckpt_dir) / "vocab.txt").string());
  print_start(f, c, lm, dev);
  job.print_summary();
  models::TextGenerator sampler(
      lm, {.temperature = f.temperature, .top_k = f.top_k, .seed = static_cast<uint64_t>(f.seed)});
  return trainer.fit(
      {.step = [&](const Tensor& x, const Tensor& y,
                   train::RunningSums& sums) { return train::lm_step(f.clip, net, params, opt, dev, job, x, y, sums); },
       .end_epoch =
           [&](const train::EpochEnd& e) {
             const train::EvalResult ev = train::evaluate_lm(net, test_set, dev, 64, &job);
             job.gather_model();  // a pipeline's stages into rank 0's model, which samples
             if (job.chatty()) lm_epoch_end(f, c, e, ev, sampler, trainer.log());
           }},
      [&] {
        if (f.ckpt_dir.empty()) return;
        job.gather_model();
        if (job.chatty()) save(lm, (fs::path(f.ckpt_dir) / "lstm_lm.ckpt").string());
      });
}

}  // namespace

int main(int argc, char** argv) {
  train::Flags flags(argc, argv,
                     "Trains an LSTM language model (Embedding -> LSTM -> Linear) on fortune cookies and prints\n"
                     "generated text and held-out perplexity (beside a unigram baseline) after each epoch.\n"
                     "Example: lstm_lm --epochs 5 --level char --checkpoint-dir ckpt_lm");
  const LmFlags f(flags);
  train::ParallelJob job("lstm_lm", train::ParallelFlags(flags));
  flags.finish();
  f.check(flags);
  train::run_precision() = train::Precision::parse(f.precision);
  try {
    if (f.threads > 0) set_num_threads(static_cast<int>(f.threads));
    const Device dev = job.start(f.device == "auto" ? Device::best() : Device(f.device));
    train::Corpus c = train::read_corpus({.data_dir = f.data_dir,
                                          .level = f.level,
                                          .lowercase = f.lowercase,
                                          .min_freq = f.min_freq,
                                          .max_vocab = f.max_vocab,
                                          .test_fraction = f.test_fraction,
                                          .split_seed = f.split_seed,
                                          .limit = f.limit});
    return train_lm(f, c, dev, job);
  } catch (const std::exception& e) {  // ember::Error, and file-system errors writing outputs
    return job.fail(e);
  }
}
