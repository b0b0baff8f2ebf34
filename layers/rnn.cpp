#include "layers/rnn.h"

#include <cmath>
#include <sstream>

#include "core/ops/creation.h"
#include "core/ops/index.h"
#include "layers/functional.h"
#include "layers/init.h"

namespace ember::nn {

RNNBase::RNNBase(RnnMode m, int64_t in, int64_t hidden, int64_t layers, bool with_bias, bool bf, double drop,
                 bool bidir, const char* name)
    : mode(m),
      input_size(in),
      hidden_size(hidden),
      num_layers(layers),
      bias(with_bias),
      batch_first(bf),
      bidirectional(bidir),
      dropout(drop),
      name_(name) {
  EMBER_CHECK(in > 0 && hidden > 0, name, ": input_size (", in, ") and hidden_size (", hidden, ") must be positive");
  EMBER_CHECK(layers > 0, name, ": num_layers must be positive, got ", layers);
  EMBER_CHECK(drop >= 0 && drop <= 1, name, ": dropout must be in [0, 1], got ", drop);
  const int64_t G = rnn_gate_count(m), D = bidir ? 2 : 1;
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      const int64_t layer_in = l == 0 ? in : hidden * D;
      std::array<Tensor*, 4> p{};
      p[0] = &register_parameter("weight_ih" + sfx, empty({G * hidden, layer_in}));
      p[1] = &register_parameter("weight_hh" + sfx, empty({G * hidden, hidden}));
      if (with_bias) {
        p[2] = &register_parameter("bias_ih" + sfx, empty({G * hidden}));
        p[3] = &register_parameter("bias_hh" + sfx, empty({G * hidden}));
      } else {
        p[2] = &register_parameter("bias_ih" + sfx, Tensor());
        p[3] = &register_parameter("bias_hh" + sfx, Tensor());
      }
      params_.push_back(p);
    }
  reset_parameters();
}

size_t RNNBase::index(int64_t layer, bool reverse) const {
  EMBER_CHECK(layer >= 0 && layer < num_layers, name_, ": layer ", layer, " is out of range for ", num_layers,
              " layers");
  EMBER_CHECK(!reverse || bidirectional, name_, ": the layer has no reverse direction (bidirectional = false)");
  return static_cast<size_t>(layer * (bidirectional ? 2 : 1) + (reverse ? 1 : 0));
}

void RNNBase::reset_parameters(Generator* gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (auto& p : params_)
    for (Tensor* t : p)
      if (t->defined()) init::uniform_(*t, -bound, bound, gen);
}

RnnOutput RNNBase::forward(const Tensor& input, const RnnState& state, const std::vector<int64_t>& lengths) {
  EMBER_CHECK(input.defined(), name_, ": undefined input");
  EMBER_CHECK(input.dim() == 3 || input.dim() == 2, name_, ": expected a 3-D input ",
              batch_first ? "[B, T, I]" : "[T, B, I]", " or an unbatched 2-D [T, I], got ", shape_str(input.shape()));
  EMBER_CHECK(input.size(-1) == input_size, name_, ": input ", shape_str(input.shape()), " has ", input.size(-1),
              " features, the layer expects input_size = ", input_size);
  const bool unbatched = input.dim() == 2;
  Tensor x = unbatched ? input.unsqueeze(1) : (batch_first ? input.transpose(0, 1) : input);
  const int64_t T = x.size(0), B = x.size(1), D = bidirectional ? 2 : 1, H = hidden_size;
  const bool lstm = mode == RnnMode::Lstm;

  auto check_state = [&](const Tensor& s, const char* what) {
    if (!s.defined()) return Tensor();
    Tensor t = unbatched ? s.unsqueeze(1) : s;
    EMBER_CHECK(t.dim() == 3 && t.size(0) == num_layers * D && t.size(1) == B && t.size(2) == H, name_, ": ", what,
                " must be [", num_layers * D, ", ", B, ", ", H, "] (num_layers * directions, batch, hidden), got ",
                shape_str(s.shape()));
    return t;
  };
  const Tensor h0 = check_state(state.h, "h0");
  const Tensor c0 = check_state(state.c, "c0");
  EMBER_CHECK(lstm || !c0.defined(), name_, ": only an LSTM takes a cell state c0");
  if (!lengths.empty()) {
    EMBER_CHECK(static_cast<int64_t>(lengths.size()) == B, name_, ": ", lengths.size(), " lengths for a batch of ", B);
    for (int64_t L : lengths) EMBER_CHECK(L >= 1 && L <= T, name_, ": sequence length ", L, " is outside [1, ", T, "]");
  }

  x = x.contiguous();
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outs;
    auto weights = [&](int64_t d) {  // direction d's operands
      const auto& p = params_[static_cast<size_t>(l * D + d)];
      const int64_t k = l * D + d;
      return RnnDirectionWeights{*p[0],
                                 *p[1],
                                 *p[2],
                                 *p[3],
                                 h0.defined() ? h0.select(0, k).contiguous() : Tensor(),
                                 c0.defined() ? c0.select(0, k).contiguous() : Tensor()};
    };
    std::vector<RnnLayerResult> rs;
    if (D == 2) {
      const auto both = rnn_layer_bidirectional(mode, x, weights(0), weights(1), lengths);
      rs.assign(both.begin(), both.end());
    } else {
      const RnnDirectionWeights w = weights(0);
      rs.push_back(rnn_layer(mode, x, w.w_ih, w.w_hh, w.b_ih, w.b_hh, w.h0, w.c0, lengths));
    }
    for (const RnnLayerResult& r : rs) {
      outs.push_back(r.output);
      h_n.push_back(r.h_n);
      if (lstm) c_n.push_back(r.c_n);
    }
    x = D == 2 ? cat(outs, 2) : outs[0];
    if (l + 1 < num_layers && dropout > 0 && is_training()) x = F::dropout(x, dropout, true);
  }

  RnnOutput out;
  out.output = unbatched ? x.squeeze(1) : (batch_first ? x.transpose(0, 1) : x);
  out.h_n = stack(h_n, 0);
  if (lstm) out.c_n = stack(c_n, 0);
  if (unbatched) {
    out.h_n = out.h_n.squeeze(1);
    if (lstm) out.c_n = out.c_n.squeeze(1);
  }
  return out;
}

std::string RNNBase::extra_repr() const {
  std::ostringstream os;
  os << input_size << ", " << hidden_size;
  if (num_layers != 1) os << ", num_layers=" << num_layers;
  if (mode == RnnMode::RnnRelu) os << ", nonlinearity='relu'";
  if (!bias) os << ", bias=false";
  if (batch_first) os << ", batch_first=true";
  if (dropout != 0) os << ", dropout=" << dropout;
  if (bidirectional) os << ", bidirectional=true";
  return os.str();
}

RNN::RNN(int64_t in, int64_t hidden, RNNOptions o)
    : RNNBase(o.nonlinearity == RnnNonlinearity::Relu ? RnnMode::RnnRelu : RnnMode::RnnTanh, in, hidden, o.num_layers,
              o.bias, o.batch_first, o.dropout, o.bidirectional, "RNN") {}

LSTM::LSTM(int64_t in, int64_t hidden, LSTMOptions o)
    : RNNBase(RnnMode::Lstm, in, hidden, o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional, "LSTM") {}

GRU::GRU(int64_t in, int64_t hidden, GRUOptions o)
    : RNNBase(RnnMode::Gru, in, hidden, o.num_layers, o.bias, o.batch_first, o.dropout, o.bidirectional, "GRU") {}

RnnSequence::RnnSequence(std::shared_ptr<RNNBase> r) : rnn(std::move(r)) {
  EMBER_CHECK(rnn != nullptr, "RnnSequence: null RNN");
  for (auto& [name, t] : rnn->named_parameters()) register_parameter(name, t);
}

void RnnSequence::train(bool on) {
  Module::train(on);
  rnn->train(on);
}

}  // namespace ember::nn
