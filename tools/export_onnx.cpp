// `ember export onnx MODEL_FILE --model NAME -o FILE`: a model file written by an example (or by
// ember::save) as an ONNX model, through interop/onnx_export.h. The zoo model's sizes that its
// constructor takes (vocabulary, widths, layers, DCGAN's batch norm) are read off the file's
// tensors, so the file alone says what to build; loading is strict, so a file of another model
// is an error that lists every mismatch.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "core/ops.h"
#include "interop/model_file.h"
#include "interop/onnx_export.h"
#include "layers/checkpoint.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::cli {
namespace {

const char* const kModels =
    "mnist_cnn, lenet5, mlp_generator, mlp_discriminator, dcgan_generator, dcgan_discriminator, lstm_lm, "
    "bilstm_classify";

const Tensor* find(const CheckpointContents& c, const std::string& name) {
  for (const nn::StateDict* d : {&c.model_parameters, &c.model_buffers})
    for (const auto& [n, t] : *d)
      if (n == name) return &t;
  return nullptr;
}

const Tensor& need(const CheckpointContents& c, const std::string& file, const std::string& name) {
  const Tensor* t = find(c, name);
  EMBER_CHECK(t, file, ": has no tensor '", name, "', which the chosen --model needs");
  return *t;
}

// The model named `name`, sized from the file's tensors, with the file loaded into it; and an
// example input of `batch` rows (and `seq` steps for the token models).
std::shared_ptr<nn::Module> build(const std::string& name, const std::string& file, int64_t batch, int64_t seq,
                                  std::vector<Tensor>& example) {
  const CheckpointContents c = read_checkpoint(file);
  std::shared_ptr<nn::Module> m;
  const Tensor noise = zeros({batch, models::kNoiseDim}), image = zeros({batch, 1, 28, 28});
  if (name == "mnist_cnn")
    m = std::make_shared<models::MnistCnn>(), example = {image};
  else if (name == "lenet5")
    m = std::make_shared<models::LeNet5>(), example = {image};
  else if (name == "mlp_generator")
    m = std::make_shared<models::MlpGenerator>(), example = {noise};
  else if (name == "mlp_discriminator")
    m = std::make_shared<models::MlpDiscriminator>(), example = {image};
  else if (name == "dcgan_generator")
    m = std::make_shared<models::DcganGenerator>(
        models::DcganGeneratorOptions{.batch_norm = find(c, "bn0.weight") != nullptr}),
    example = {noise};
  else if (name == "dcgan_discriminator")
    m = std::make_shared<models::DcganDiscriminator>(), example = {image};
  else if (name == "lstm_lm" || name == "bilstm_classify") {
    const Tensor& embed = need(c, file, "embed.weight");
    const Tensor& whh = need(c, file, "lstm.weight_hh_l0");
    const Tensor& head = need(c, file, "head.weight");
    const Tensor tokens = zeros({batch, seq}, {.dtype = DType::Int64});
    if (name == "lstm_lm") {
      int64_t layers = 1;
      while (find(c, "lstm.weight_hh_l" + std::to_string(layers))) ++layers;
      m = std::make_shared<models::LstmLanguageModel>(models::LstmLmOptions{
          .vocab_size = embed.size(0), .embed_dim = embed.size(1), .hidden = whh.size(1), .layers = layers});
      example = {tokens};
    } else {
      m = std::make_shared<models::BiLstmClassifier>(models::BiLstmOptions{
          .vocab_size = embed.size(0), .embed_dim = embed.size(1), .hidden = whh.size(1), .classes = head.size(0)});
      example = {tokens, full({batch}, static_cast<double>(seq), {.dtype = DType::Int64})};
    }
  } else {
    throw UsageError("--model: unknown model '" + name + "' (expected one of " + kModels + ")");
  }
  load(*m, file);
  return m;
}

// Network `network` of a model file (`ember train`'s; default: the one its task trains, a GAN's
// generator), sized by the checkpoint's tensors where the vocabulary sizes it, with `file` loaded
// into it; and an example input of `batch` rows.
std::shared_ptr<nn::Module> build_from_model_file(const std::string& model_file, const std::string& network,
                                                  const std::string& file, int64_t batch,
                                                  std::vector<Tensor>& example) {
  const model_file::LoadedFile mf = model_file::load(model_file);
  const auto& s = mf.spec;
  int index = -1;
  if (network.empty()) {
    index = s.has_gan()              ? model_file::network_index(mf, s.gan().generator(), "gan")
            : s.has_language_model() ? model_file::network_index(mf, s.language_model().network(), "language_model")
                                     : model_file::network_index(mf, s.classifier().network(), "classifier");
  } else {
    for (int i = 0; i < s.network_size(); ++i)
      if (s.network(i).name() == network) index = i;
    if (index < 0) throw UsageError("--network: " + model_file + " has no network '" + network + "'");
  }
  const auto& n = s.network(index);
  int64_t vocabulary = 0;
  if (n.layer(0).has_embedding() && !n.layer(0).embedding().has_num_embeddings())
    vocabulary = need(read_checkpoint(file), file, n.layer(0).name() + ".weight").size(0);
  auto net = model_file::build_network(mf, index, vocabulary);
  load(*net, file);
  example = {model_file::example_input(n, batch)};
  return net;
}

// -o naming a file the export reads (the trained checkpoint, the model file) would replace it with
// the ONNX model: refused, as the same file under any spelling (a link, ./x, a hard link).
// equivalent() is false when either does not exist: a new -o cannot be an existing input.
void refuse_input_as_output(const std::string& out, const std::string& input) {
  std::error_code ec;  // a missing input is the reader's error, with its own message
  EMBER_CHECK(!std::filesystem::equivalent(out, input, ec), "-o ", out, ": is the input file ", input,
              ", which the export would overwrite (expected a new .onnx path)");
}

int export_onnx(const std::vector<std::string>& args) {
  Flags f;
  f.add("model", "NAME", std::string("the model the file holds: ") + kModels);
  f.add("model-file", "FILE", "or: the model file (.pbtxt) `ember train` trained it from");
  f.add("network", "NAME", "with --model-file: the network to export (default: the task's; a GAN's generator)");
  f.add("o", "FILE", "the .onnx file to write");
  f.add("batch", "N", "rows of the example input the export traces with (default 1; the batch stays free)");
  f.add("seq-len", "T", "time steps of the token models' example input (default 8; stays free)");
  f.add("static", "", "fix every dimension to the example's instead of leaving batch and sequence free");
  f.add("help", "", "show this help");
  const std::string usage =
      usage_of("ember export onnx MODEL_FILE (--model NAME | --model-file FILE.pbtxt) -o FILE [flags]", f) +
      "\nMODEL_FILE is a model file an example wrote (mnist_cnn.ckpt, mnist_gan_generator.ckpt, "
      "lstm_lm.ckpt, ...) or any file of ember::save(module, path).\n";
  return run_leaf("ember export onnx", usage, [&]() -> int {
    std::vector<std::string> rest = args;
    std::string file;
    if (!rest.empty() && !rest[0].starts_with("-")) {
      file = rest[0];
      rest.erase(rest.begin());
    }
    f.parse(rest);
    if (help_asked(f, usage)) return 0;
    if (file.empty()) throw UsageError("expected the model file before the flags");
    if (f.has("model") == f.has("model-file")) throw UsageError("expected one of --model and --model-file");
    if (f.has("network") && !f.has("model-file")) throw UsageError("--network goes with --model-file");
    const std::string model = f.has("model") ? f.str("model") : f.str("model-file"), out = f.require("o");
    refuse_input_as_output(out, file);
    if (f.has("model-file")) refuse_input_as_output(out, model);
    const int64_t batch = f.integer("batch", 1, 1, 1 << 20), seq = f.integer("seq-len", 8, 1, 1 << 20);
    std::vector<Tensor> example;
    const std::shared_ptr<nn::Module> m = f.has("model")
                                              ? build(model, file, batch, seq, example)
                                              : build_from_model_file(model, f.str("network"), file, batch, example);
    onnx::export_model(*m, example, out, {.dynamic_batch = !f.has("static"), .metadata = {{"ember.model", model}}});
    std::cout << "wrote " << out << ": " << m->type_name() << ", " << m->num_parameters() << " parameters\n";
    return 0;
  });
}

}  // namespace

std::vector<Command> export_commands() {
  return {{"onnx", "a model file as an ONNX model (opset 17) for onnxruntime, TensorRT and others", export_onnx}};
}

}  // namespace ember::cli
