// `ember predict CHECKPOINT --input FILE...`: a classifier's class probabilities (softmax of its
// logits) for images (PNG, JPEG, BMP through stb_image; folders of them) or CSV rows, each read as
// its training read its data (tools/saved_classifier.h), as a table or as JSON.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <numeric>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "data/csv_dataset.h"
#include "scheduler/sim/report.h"
#include "tools/command.h"
#include "tools/command_args.h"
#include "tools/flags.h"
#include "tools/saved_classifier.h"

namespace ember::tools {
namespace {

const char* const kAbout =
    "\nCHECKPOINT and the network are found as `ember eval` finds them (see 'ember eval --help'). --input takes\n"
    "image files, folders of them (every PNG, JPEG and BMP below, sorted), or, for a model trained on CSV rows,\n"
    "CSV files: rows of the training file's features, with or without its label column. Each input is read as\n"
    "the training read its data (size, channels, normalisation). Table: the most likely classes of each input;\n"
    "JSON: every class's probability.\n";

// The inputs, named, and how to read examples [at, at + n) of them as one float batch (images are
// decoded a batch at a time, so a large folder is never held whole).
struct Inputs {
  std::vector<std::string> names;
  std::function<Tensor(int64_t at, int64_t n)> batch;
};

// CSV rows: all columns features, or the training layout with its label column (ignored).
Inputs csv_inputs(const SavedClassifier& m, const std::vector<std::string>& files) {
  Inputs in;
  std::vector<Tensor> parts;
  const int64_t features = m.input_shape[0];
  for (const std::string& path : files) {
    data::CsvTable t = data::read_csv(path, {.no_label = true});
    if (t.features.size(1) == features + 1) t = data::read_csv(path, {.label_column = m.csv_label_column});
    EMBER_CHECK(t.features.size(1) == features, "--input ", path, ": its rows have ", t.features.size(1),
                " columns but ", m.what, " takes ", features, " features (with or without the label column)");
    for (int64_t r = 0; r < t.features.size(0); ++r) in.names.push_back(path + ":row " + std::to_string(r + 1));
    parts.push_back(t.features);
  }
  in.batch = [x = cat(parts, 0)](int64_t at, int64_t n) { return x.slice(0, at, at + n); };
  return in;
}

Inputs image_inputs(const SavedClassifier& m, const std::vector<std::string>& inputs) {
  Inputs in;
  in.names = image_files(inputs);
  in.batch = [&m, names = in.names](int64_t at, int64_t n) {
    std::vector<Tensor> images;
    for (int64_t i = at; i < at + n; ++i) images.push_back(m.read_image(names[static_cast<size_t>(i)]));
    return data::collate(images);
  };
  return in;
}

// Softmax of the logits, in batches of 256, on `dev`: float [N, classes] on the CPU.
Tensor probabilities(nn::Module& net, const Inputs& in, Device dev) {
  NoGradGuard ng;
  net.eval();
  std::vector<Tensor> out;
  const int64_t total = static_cast<int64_t>(in.names.size());
  for (int64_t at = 0; at < total; at += 256)
    out.push_back(net(in.batch(at, std::min<int64_t>(256, total - at)).to(dev)).softmax(1).cpu());
  return cat(out, 0).contiguous();
}

// The classes of row r by falling probability.
std::vector<int64_t> ranked(const float* p, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [p](int64_t a, int64_t b) { return p[a] > p[b]; });
  return order;
}

void print_json(const SavedClassifier& m, const Inputs& in, const Tensor& probs) {
  const int64_t k = probs.size(1);
  std::string classes;
  for (const std::string& c : m.classes) classes += (classes.empty() ? "" : ", ") + sched::json_string(c);
  std::printf("{\"classes\": [%s],\n \"predictions\": [", classes.c_str());
  for (size_t i = 0; i < in.names.size(); ++i) {
    const float* p = probs.data_ptr<float>() + static_cast<int64_t>(i) * k;
    const int64_t best = ranked(p, k)[0];
    std::printf("%s\n  {\"input\": %s, \"class\": %s, \"index\": %lld, \"probability\": %.9g, \"probabilities\": [",
                i ? "," : "", sched::json_string(in.names[i]).c_str(), sched::json_string(m.classes[best]).c_str(),
                (long long)best, p[best]);
    for (int64_t c = 0; c < k; ++c) std::printf("%s%.9g", c ? ", " : "", p[c]);
    std::printf("]}");
  }
  std::printf("\n]}\n");
}

void print_table(const SavedClassifier& m, const Inputs& in, const Tensor& probs, int64_t top) {
  const int64_t k = probs.size(1);
  size_t width = 5;
  for (const std::string& n : in.names) width = std::max(width, n.size());
  std::printf("%-*s  class (probability)%s\n", static_cast<int>(width), "input", top > 1 ? ", then the next" : "");
  for (size_t i = 0; i < in.names.size(); ++i) {
    const float* p = probs.data_ptr<float>() + static_cast<int64_t>(i) * k;
    const std::vector<int64_t> order = ranked(p, k);
    std::printf("%-*s ", static_cast<int>(width), in.names[i].c_str());
    for (int64_t j = 0; j < std::min(top, k); ++j)
      std::printf(" %s (%.4f)", m.classes[static_cast<size_t>(order[j])].c_str(), p[order[j]]);
    std::printf("\n");
  }
}

}  // namespace

int predict(const std::vector<std::string>& args) {
  Flags f;
  f.add("input", "FILE", "an image, a folder of images or a CSV file (repeatable)", true);
  f.add("model-file", "FILE", "the model file (.pbtxt) to rebuild the network from (default: the one recorded)");
  f.add("model", "NAME", "or: the zoo's classifier the checkpoint holds (mnist_cnn, lenet5)");
  f.add("format", "F", "table (default) or json");
  f.add("top", "K", "table: the K most likely classes of each input (default 3)");
  f.add("device", "DEV", "auto, cpu, cuda or cuda:N (default auto)");
  f.add("help", "", "show this help");
  const std::string usage =
      usage_of("ember predict CHECKPOINT --input FILE... [--model-file F | --model NAME] [flags]", f) + kAbout;
  return run_leaf("ember predict", usage, [&]() -> int {
    std::vector<std::string> rest = args;
    const std::string ckpt = take_leading_argument(rest);
    f.parse(rest);
    if (help_asked(f, usage)) return 0;
    if (ckpt.empty()) throw UsageError("expected the checkpoint before the flags");
    const std::vector<std::string> inputs = f.all("input");
    if (inputs.empty()) throw UsageError("--input is required (an image, a folder of images or a CSV file)");
    const std::string format = f.str("format", "table");
    if (format != "table" && format != "json")
      throw UsageError("--format: expected table or json, got '" + format + "'");
    const long top = f.integer("top", 3, 1, 1L << 20);
    const Device dev = device_flag(f);
    SavedCheckpoint saved(ckpt);
    SavedClassifier m = open_classifier(saved, {f.str("model"), f.str("model-file")});
    for (const std::string& note : m.notes) std::cerr << "ember predict: note: " << note << "\n";
    const Inputs in = m.kind == InputKind::Csv ? csv_inputs(m, inputs) : image_inputs(m, inputs);
    m.net->to(dev);
    const Tensor probs = probabilities(*m.net, in, dev);
    if (format == "json")
      print_json(m, in, probs);
    else
      print_table(m, in, probs, top);
    return 0;
  });
}

}  // namespace ember::tools
