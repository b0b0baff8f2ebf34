#include "interop/onnx_export.h"

#include <climits>
#include <cmath>

#include "core/atomic_file.h"
#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "ember/config.h"
#include "interop/onnx_graph.h"
#include "interop/onnx_layers.h"
#include "layers/nn.h"
#include "models/lstm.h"

namespace ember::onnx {
namespace {

// Evaluation mode for the export, the caller's mode afterwards (also when the export throws).
class EvalGuard {
 public:
  explicit EvalGuard(nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalGuard() { m_.train(was_training_); }
  EvalGuard(const EvalGuard&) = delete;
  EvalGuard& operator=(const EvalGuard&) = delete;

 private:
  nn::Module& m_;
  bool was_training_;
};

// Which dimensions of a value stay free: the batch, and the time of token sequences.
std::map<int64_t, std::string> free_dims(const Tensor& t, bool dynamic, bool has_sequence) {
  if (!dynamic || t.dim() == 0) return {};
  std::map<int64_t, std::string> d{{0, "batch"}};
  if (has_sequence && t.dim() >= 2) d[1] = "sequence";
  return d;
}

bool is_token_input(const Tensor& t) {
  return t.dtype() == DType::Int64 && t.dim() == 2;
}

void check_inputs(const std::vector<Tensor>& inputs, size_t expected, const std::string& model, const char* what) {
  EMBER_CHECK(inputs.size() == expected, "ONNX export: ", model, " takes ", what, ", got ", inputs.size(),
              " example input", inputs.size() == 1 ? "" : "s");
  for (size_t i = 0; i < inputs.size(); ++i)
    EMBER_CHECK(inputs[i].defined(), "ONNX export: example input ", i, " of ", model, " is undefined");
}

// The layers traced one after another must give the model's own output: otherwise its forward
// does something its layers do not say (a Sequential subclass with a forward of its own).
void check_same(const Tensor& traced, const Tensor& reference, const std::string& model) {
  EMBER_CHECK(traced.shape() == reference.shape(), "ONNX export: ", model, "'s layers give ", shape_str(traced.shape()),
              " but its forward gives ", shape_str(reference.shape()), ": its forward is not the chain of its layers");
  const Tensor ref = reference.to(DType::Float64);
  const double diff = (traced.to(DType::Float64) - ref).abs().max().item<double>();
  const double scale = ref.abs().max().item<double>();
  EMBER_CHECK(diff <= 1e-5 * (1 + scale), "ONNX export: ", model, "'s layers differ from its forward by ", diff,
              " (max abs): its forward is not the chain of its layers");
}

// tokens [B, T] and lengths [B] -> logits: embed, the bidirectional LSTM over each sequence's
// length, both directions' final states side by side, the head.
Traced bilstm_classifier(GraphBuilder& g, models::BiLstmClassifier& m, const std::vector<Tensor>& in, bool dynamic,
                         Tensor& reference) {
  check_inputs(in, 2, "BiLstmClassifier", "2 inputs (tokens [B, T] and lengths [B], int64)");
  EMBER_CHECK(in[1].dtype() == DType::Int64 && in[1].dim() == 1 && in[1].size(0) == in[0].size(0),
              "ONNX export: BiLstmClassifier's lengths must be int64 [", in[0].size(0), "], got ",
              dtype_name(in[1].dtype()), " ", shape_str(in[1].shape()));
  EMBER_CHECK(m.lstm.num_layers == 1, "ONNX export: BiLstmClassifier with ", m.lstm.num_layers, " LSTM layers");
  const Tensor lengths_host = in[1].cpu().contiguous();
  const std::vector<int64_t> lengths(lengths_host.data_ptr<int64_t>(),
                                     lengths_host.data_ptr<int64_t>() + lengths_host.numel());
  reference = m.forward(in[0], lengths);
  g.input("tokens", DType::Int64, in[0].shape(), free_dims(in[0], dynamic, true));
  g.input("lengths", DType::Int64, in[1].shape(), free_dims(in[1], dynamic, false));
  // ONNX's sequence_lens is int32.
  const std::string lengths32 = g.node1("Cast", {"lengths"}, "lengths_int32", {{"to", int64_t{6}}});
  const Traced embedded = emit_module(g, m.embed, "embed", {"tokens", in[0]});
  const TracedRnn r = emit_rnn(g, m.lstm, "lstm", embedded, lengths32, lengths);
  // Y_h [2, B, H] -> [B, 2, H] -> [B, 2H]: the forward direction's state, then the backward one's.
  const std::string bdh = g.node1("Transpose", {r.h_n[0]}, "lstm.final", {{"perm", std::vector<int64_t>{1, 0, 2}}});
  const std::string both = g.node1("Reshape", {bdh, g.int64s("lstm.final.shape", {0, -1})}, "lstm.final_states");
  const Tensor both_example = cat({r.h_n_example.select(0, 0), r.h_n_example.select(0, 1)}, 1);
  return emit_module(g, m.head, "head", {both, both_example});
}

Traced language_model(GraphBuilder& g, models::LstmLanguageModel& m, const std::vector<Tensor>& in, bool dynamic,
                      Tensor& reference) {
  check_inputs(in, 1, "LstmLanguageModel", "1 input (tokens [B, T], int64)");
  reference = m.forward(in[0]);
  g.input("tokens", DType::Int64, in[0].shape(), free_dims(in[0], dynamic, true));
  const Traced embedded = emit_module(g, m.embed, "embed", {"tokens", in[0]});
  return emit_module(g, m.head, "head", emit_rnn(g, m.lstm, "lstm", embedded).output);
}

}  // namespace

onnx_schema::ModelProto to_onnx(nn::Module& module, const std::vector<Tensor>& example_inputs,
                                const ExportOptions& options) {
  EMBER_CHECK(options.opset >= 17 && options.opset <= 21, "ONNX export: opset ", options.opset,
              " is not written (expected 17 to 21)");
  for (const auto& [name, p] : module.named_parameters())
    EMBER_CHECK(!is_floating(p.dtype()) || p.dtype() == DType::Float32, "ONNX export: parameter '", name, "' is ",
                dtype_name(p.dtype()), " (expected float32: convert with module.to(DType::Float32))");
  EvalGuard eval(module);
  NoGradGuard no_grad;

  onnx_schema::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("ember");
  model.set_producer_version(EMBER_VERSION);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  for (const auto& [k, v] : options.metadata) {
    auto* p = model.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  onnx_schema::GraphProto* graph = model.mutable_graph();
  graph->set_name(module.type_name());
  GraphBuilder g(graph);

  const bool dynamic = options.dynamic_batch;
  Tensor reference;
  Traced out;
  bool sequence_out = false;
  if (auto* m = dynamic_cast<models::BiLstmClassifier*>(&module)) {
    out = bilstm_classifier(g, *m, example_inputs, dynamic, reference);
  } else if (auto* m = dynamic_cast<models::LstmLanguageModel*>(&module)) {
    out = language_model(g, *m, example_inputs, dynamic, reference);
    sequence_out = true;
  } else {
    check_inputs(example_inputs, 1, module.type_name(), "1 input");
    const Tensor& x = example_inputs[0];
    reference = module.forward(x);
    g.input("input", x.dtype(), x.shape(), free_dims(x, dynamic, is_token_input(x)));
    out = emit_module(g, module, "", {"input", x});
    sequence_out = is_token_input(x) && reference.dim() >= 3;
  }
  check_same(out.example, reference, module.type_name());
  // The node that makes the model's output names it "output" (every layer emits at least one node).
  for (auto& node : *graph->mutable_node())
    for (auto& name : *node.mutable_output())
      if (name == out.name) name = "output";
  g.output("output", reference.dtype(), reference.shape(), free_dims(reference, dynamic, sequence_out));
  return model;
}

void export_model(nn::Module& module, const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options) {
  const onnx_schema::ModelProto model = to_onnx(module, example_inputs, options);
  // A Protobuf message cannot pass 2 GiB; ONNX's external-data files are not written.
  EMBER_CHECK(model.ByteSizeLong() < static_cast<size_t>(INT_MAX), "ONNX export: the model is ", model.ByteSizeLong(),
              " bytes, over Protobuf's 2 GiB limit (external data is not written)");
  write_file_atomic(path, model.SerializeAsString());
}

}  // namespace ember::onnx
