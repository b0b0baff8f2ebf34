// `ember export onnx MODEL_FILE --model NAME -o FILE`: a model file written by an example (or by
// ember::save) as an ONNX model, through interop/onnx_export.h. The zoo model's sizes that its
// constructor takes (vocabulary, widths, layers, DCGAN's batch norm) are read off the file's
// tensors, so the file alone says what to build (tools/saved_model.h); loading is strict, so a
// file of another model is an error that lists every mismatch.
#include <filesystem>
#include <iostream>
#include <memory>

#include "interop/onnx_export.h"
#include "tools/command.h"
#include "tools/command_args.h"
#include "tools/flags.h"
#include "tools/saved_model.h"

namespace ember::tools {
namespace {

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
  f.add("model", "NAME", std::string("the model the file holds: ") + kZooModels);
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
    const std::string file = take_leading_argument(rest);
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
    SavedCheckpoint ckpt(file);
    const std::shared_ptr<nn::Module> m = f.has("model")
                                              ? zoo_model(model, ckpt, batch, seq, example)
                                              : model_file_network(model, f.str("network"), ckpt, batch, example);
    onnx::export_model(*m, example, out, {.dynamic_batch = !f.has("static"), .metadata = {{"ember.model", model}}});
    std::cout << "wrote " << out << ": " << m->type_name() << ", " << m->num_parameters() << " parameters\n";
    return 0;
  });
}

}  // namespace

std::vector<Command> export_commands() {
  return {{"onnx", "a model file as an ONNX model (opset 17) for onnxruntime, TensorRT and others", export_onnx}};
}

}  // namespace ember::tools
