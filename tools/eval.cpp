// `ember eval CHECKPOINT [--model-file F | --model NAME] [--data D]`: the test loss and accuracy of
// a classifier's checkpoint without training, computed by the examples' own evaluation
// (train::evaluate_classifier, batches of 256) on data read as its training read them, so the
// numbers are the ones the training run printed for the same weights and test set; for a model
// file's language model, its held-out loss, perplexity and accuracy (eval_language_model.h).
#include <cstdio>
#include <iostream>

#include "tools/command.h"
#include "tools/command_args.h"
#include "tools/eval_language_model.h"
#include "tools/flags.h"
#include "tools/saved_classifier.h"
#include "train/classifier.h"

namespace ember::tools {
namespace {

const char* const kAbout =
    "\nCHECKPOINT is a classifier's checkpoint: last.ckpt or the model file (NAME.ckpt) of `ember train FILE`,\n"
    "mnist_cnn's (or any example's on the zoo's mnist_cnn and lenet5). The network is the model file the\n"
    "checkpoint records (or --model-file), or the example's model (or --model). --data: an MNIST folder, an\n"
    "image folder of class subfolders (named by class or class number) or a CSV file, as the model reads;\n"
    "left out, the test set the checkpoint was trained with. Use --limit N as the training run did to compare.\n"
    "A language model's checkpoint (ember train on a language_model file): held-out loss, perplexity and\n"
    "accuracy on the corpus rebuilt from the file's text source (--data: other fortunes) with the run's --limit.\n";

}  // namespace

int eval(const std::vector<std::string>& args) {
  Flags f;
  f.add("model-file", "FILE", "the model file (.pbtxt) to rebuild the network from (default: the one recorded)");
  f.add("model", "NAME", "or: the zoo's classifier the checkpoint holds (mnist_cnn, lenet5)");
  f.add("data", "D", "the labelled examples (default: the test set the checkpoint was trained with)");
  f.add("limit", "N", "only the first N examples (-1: all; the examples' --limit)");
  f.add("device", "DEV", "auto, cpu, cuda or cuda:N (default auto)");
  f.add("format", "F", "text (default) or json");
  f.add("help", "", "show this help");
  const std::string usage =
      usage_of("ember eval CHECKPOINT [--model-file F | --model NAME] [--data D] [flags]", f) + kAbout;
  return run_leaf("ember eval", usage, [&]() -> int {
    std::vector<std::string> rest = args;
    const std::string ckpt = take_leading_argument(rest);
    f.parse(rest);
    if (help_asked(f, usage)) return 0;
    if (ckpt.empty()) throw UsageError("expected the checkpoint before the flags");
    const std::string format = f.str("format", "text");
    if (format != "text" && format != "json") throw UsageError("--format: expected text or json, got '" + format + "'");
    const long limit = f.integer("limit", -1, -1, 1L << 40);
    if (limit == 0) throw UsageError("--limit: expected -1 (all) or at least 1, got '0'");
    const Device dev = device_flag(f);
    SavedCheckpoint saved(ckpt);  // read once, by the first step that needs it
    if (f.str("model").empty())
      if (const auto lm = language_model_file(saved, f.str("model-file")))
        return eval_language_model(*lm, {&saved, f.str("data"), limit, f.has("limit"), dev, format == "json"});
    SavedClassifier m = open_classifier(saved, {f.str("model"), f.str("model-file")});
    for (const std::string& note : m.notes) std::cerr << "ember eval: note: " << note << "\n";
    if (auto it = m.meta.find("flag.limit");
        it != m.meta.end() && it->second != "-1" && !f.has("limit") && !f.has("data"))
      std::cerr << "ember eval: note: the training run evaluated on the first " << it->second << " examples (--limit "
                << it->second << "); pass --limit " << it->second << " for its numbers\n";
    TestSet t = open_test_set(m, f.str("data"), limit);
    EMBER_CHECK(t.set->size() > 0, t.name, " holds no examples");
    m.net->to(dev);
    const auto [acc, loss] = train::evaluate_classifier(*m.net, *t.set, dev, 256);
    if (format == "json") {
      std::printf("{\"loss\": %.17g, \"accuracy\": %.17g, \"examples\": %lld}\n", loss, acc, (long long)t.set->size());
      return 0;
    }
    std::printf("Evaluating %s from %s on %s (%lld examples) on %s\n", m.what.c_str(), ckpt.c_str(), t.name.c_str(),
                (long long)t.set->size(), train::device_label(dev).c_str());
    std::printf("test loss %.4f acc %.4f\n", loss, acc);
    return 0;
  });
}

}  // namespace ember::tools
