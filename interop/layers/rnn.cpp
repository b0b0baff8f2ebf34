// RNN, LSTM and GRU (layers/rnn.h) in model files (lstm, gru, rnn: batch first, from a zero state,
// as an nn::RnnSequence) and in ONNX (one RNN, LSTM or GRU operator per layer: emit_rnn).
#include "layers/rnn.h"

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "core/shape.h"
#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

const train_file::Recurrent& fields(const Layer& l) {
  return l.kind_case() == Layer::kLstm ? l.lstm() : l.kind_case() == Layer::kGru ? l.gru() : l.rnn();
}

std::shared_ptr<nn::Module> rnn_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& r = fields(l);
  const int64_t hidden = at.required_size(r.has_hidden(), r.hidden(), "hidden");
  at.valid(r.dropout() >= 0 && r.dropout() < 1, "dropout", r.dropout(), "a probability in [0, 1)");
  at.check(x.dim() == 3, at.kind, "its input is " + shape_str(x.shape()) + " (expected [N, T, features])");
  const int64_t layers = at.size_or(r.has_layers(), r.layers(), 1, "layers");
  std::shared_ptr<nn::RNNBase> rnn;
  if (l.kind_case() == Layer::kRnn) {
    rnn = std::make_shared<nn::RNN>(
        x.size(2), hidden,
        nn::RNNOptions{.num_layers = layers,
                       .nonlinearity = r.relu() ? nn::RnnNonlinearity::Relu : nn::RnnNonlinearity::Tanh,
                       .batch_first = true,
                       .dropout = r.dropout(),
                       .bidirectional = r.bidirectional()});
  } else {
    const nn::LSTMOptions o{
        .num_layers = layers, .batch_first = true, .dropout = r.dropout(), .bidirectional = r.bidirectional()};
    if (l.kind_case() == Layer::kLstm)
      rnn = std::make_shared<nn::LSTM>(x.size(2), hidden, o);
    else
      rnn = std::make_shared<nn::GRU>(x.size(2), hidden, o);
  }
  return std::make_shared<nn::RnnSequence>(rnn);
}

onnx::Traced rnn_sequence_to_onnx(onnx::GraphBuilder& g, nn::RnnSequence& m, const std::string& path,
                                  const onnx::Traced& x) {
  return onnx::emit_rnn(g, *m.rnn, path, x).output;
}

const model_file::LayerRegistration lstm_file{Layer::kLstm, {.build = rnn_from_file}};
const model_file::LayerRegistration gru_file{Layer::kGru, {.build = rnn_from_file}};
const model_file::LayerRegistration rnn_file{Layer::kRnn, {.build = rnn_from_file}};
const onnx::ExporterRegistration<nn::RnnSequence> rnn_sequence_onnx{"RNN/LSTM/GRU", rnn_sequence_to_onnx};

}  // namespace
}  // namespace ember
