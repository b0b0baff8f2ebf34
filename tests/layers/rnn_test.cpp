// RNN, LSTM and GRU modules: PyTorch's parameter names, shapes and initialisation; values against
// step-by-step cell equations written with core ops; batch_first; the reverse direction as the
// forward direction over the reversed sequence; variable lengths against each sequence run
// alone; initial states; dropout between layers; gradchecks of multi-layer bidirectional LSTM and
// GRU with variable lengths; errors.
#include <cmath>

#include "test_util.h"

using namespace ember;
using namespace layers_test;

namespace {

// Rows [a, b) of a [G*H, ...] gate-stacked tensor.
Tensor gate(const Tensor& w, int64_t k, int64_t H) {
  return w.narrow(0, k * H, H);
}

// One step of each cell, PyTorch's equations, with core ops. x [B, I], h/c [B, H].
Tensor lin(const Tensor& x, const Tensor& w, const Tensor& b) {
  return matmul(x, w.t()) + b;
}

std::pair<Tensor, Tensor> lstm_step(nn::RNNBase& m, int64_t layer, bool rev, const Tensor& x, const Tensor& h,
                                    const Tensor& c) {
  const int64_t H = m.hidden_size;
  auto g = [&](int64_t k) {
    return lin(x, gate(m.weight_ih(layer, rev), k, H), gate(m.bias_ih(layer, rev), k, H)) +
           lin(h, gate(m.weight_hh(layer, rev), k, H), gate(m.bias_hh(layer, rev), k, H));
  };
  Tensor i = sigmoid(g(0)), f = sigmoid(g(1)), gg = tanh(g(2)), o = sigmoid(g(3));
  Tensor c2 = f * c + i * gg;
  return {o * tanh(c2), c2};
}

Tensor gru_step(nn::RNNBase& m, const Tensor& x, const Tensor& h) {
  const int64_t H = m.hidden_size;
  auto gi = [&](int64_t k) { return lin(x, gate(m.weight_ih(0), k, H), gate(m.bias_ih(0), k, H)); };
  auto gh = [&](int64_t k) { return lin(h, gate(m.weight_hh(0), k, H), gate(m.bias_hh(0), k, H)); };
  Tensor r = sigmoid(gi(0) + gh(0)), z = sigmoid(gi(1) + gh(1));
  Tensor n = tanh(gi(2) + r * gh(2));
  return (1.0 - z) * n + z * h;
}

// x reversed along dim 0.
Tensor flip0(const Tensor& x) {
  const int64_t T = x.size(0);
  return index_select(x, 0, arange(static_cast<double>(T - 1), -1.0, -1.0));
}

}  // namespace

TEST(Rnn, PyTorchParameterNamesShapesAndInit) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  EXPECT_EQ(
      names(lstm.named_parameters()),
      (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                                "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1",
                                "weight_hh_l1", "bias_ih_l1", "bias_hh_l1", "weight_ih_l1_reverse",
                                "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"}));
  EXPECT_EQ(lstm.weight_ih(0).shape(), (Shape{16, 3}));
  EXPECT_EQ(lstm.weight_ih(1, true).shape(), (Shape{16, 8}));
  EXPECT_EQ(lstm.weight_hh(1).shape(), (Shape{16, 4}));
  for (const Tensor& p : lstm.parameters())
    for (double v : vec(p)) EXPECT_LE(std::abs(v), 0.5);  // U(-1/sqrt(4), 1/sqrt(4))
  nn::GRU gru(2, 5, {.bias = false});
  EXPECT_EQ(names(gru.named_parameters()), (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"}));
  EXPECT_EQ(gru.weight_ih(0).shape(), (Shape{15, 2}));
  nn::RNN rnn(2, 3, {.nonlinearity = nn::RnnNonlinearity::Relu});
  EXPECT_EQ(rnn.weight_hh(0).shape(), (Shape{3, 3}));
  EXPECT_EQ(rnn.extra_repr(), "2, 3, nonlinearity='relu'");
  EXPECT_EQ(lstm.extra_repr(), "3, 4, num_layers=2, bidirectional=true");

  nn::RnnOutput o = lstm(zeros({5, 2, 3}));
  EXPECT_EQ(o.output.shape(), (Shape{5, 2, 8}));
  EXPECT_EQ(o.h_n.shape(), (Shape{4, 2, 4}));
  EXPECT_EQ(o.c_n.shape(), (Shape{4, 2, 4}));
  EXPECT_FALSE(gru(zeros({5, 2, 2})).c_n.defined());
}

TEST(Rnn, LstmMatchesCellEquations) {
  nn::LSTM lstm(3, 4);
  Tensor x = randn({4, 2, 3});
  Tensor h0 = randn({1, 2, 4}), c0 = randn({1, 2, 4});
  nn::RnnOutput o = lstm(x, {h0, c0});
  Tensor h = h0[0], c = c0[0];
  for (int64_t t = 0; t < 4; ++t) {
    std::tie(h, c) = lstm_step(lstm, 0, false, x[t], h, c);
    expect_near(vec(o.output[t]), vec(h), 1e-5);
  }
  expect_near(vec(o.h_n[0]), vec(h), 1e-5);
  expect_near(vec(o.c_n[0]), vec(c), 1e-5);
}

TEST(Rnn, GruAndReluRnnMatchCellEquations) {
  nn::GRU gru(3, 4);
  Tensor x = randn({3, 2, 3});
  nn::RnnOutput o = gru(x);
  Tensor h = zeros({2, 4});
  for (int64_t t = 0; t < 3; ++t) h = gru_step(gru, x[t], h);
  expect_near(vec(o.h_n[0]), vec(h), 1e-5);

  nn::RNN rnn(3, 4, {.nonlinearity = nn::RnnNonlinearity::Relu});
  Tensor hr = zeros({2, 4});
  for (int64_t t = 0; t < 3; ++t)
    hr = relu(lin(x[t], rnn.weight_ih(0), rnn.bias_ih(0)) + lin(hr, rnn.weight_hh(0), rnn.bias_hh(0)));
  expect_near(vec(rnn(x).h_n[0]), vec(hr), 1e-5);
}

TEST(Rnn, BatchFirstAndUnbatched) {
  nn::GRU tm(3, 4, {.num_layers = 2});
  nn::GRU bf(3, 4, {.num_layers = 2, .batch_first = true});
  bf.load_state_dict(tm.state_dict());
  Tensor x = randn({5, 2, 3});
  nn::RnnOutput a = tm(x), b = bf(x.transpose(0, 1));
  EXPECT_EQ(b.output.shape(), (Shape{2, 5, 4}));
  expect_near(vec(b.output.transpose(0, 1).contiguous()), vec(a.output), 1e-6);
  expect_near(vec(b.h_n), vec(a.h_n), 1e-6);
  nn::RnnOutput u = tm(x.select(1, 1));
  EXPECT_EQ(u.output.shape(), (Shape{5, 4}));
  EXPECT_EQ(u.h_n.shape(), (Shape{2, 4}));
  expect_near(vec(u.h_n), vec(a.h_n.select(1, 1)), 1e-6);
}

TEST(Rnn, ReverseDirectionIsForwardOverReversedSequence) {
  nn::LSTM bi(3, 4, {.bidirectional = true});
  nn::LSTM uni(3, 4);
  {
    NoGradGuard ng;
    uni.weight_ih(0).copy_(bi.weight_ih(0, true));
    uni.weight_hh(0).copy_(bi.weight_hh(0, true));
    uni.bias_ih(0).copy_(bi.bias_ih(0, true));
    uni.bias_hh(0).copy_(bi.bias_hh(0, true));
  }
  Tensor x = randn({5, 2, 3});
  nn::RnnOutput o = bi(x);
  nn::RnnOutput r = uni(flip0(x));
  expect_near(vec(o.output.narrow(2, 4, 4).contiguous()), vec(flip0(r.output)), 1e-5);
  expect_near(vec(o.h_n[1]), vec(r.h_n[0]), 1e-5);
}

TEST(Rnn, VariableLengthsMatchEachSequenceAlone) {
  nn::LSTM lstm(2, 3, {.num_layers = 2, .bidirectional = true});
  const int64_t T = 4;
  std::vector<int64_t> lengths{2, 4, 1};
  Tensor x = randn({T, 3, 2});
  nn::RnnOutput o = lstm(x, {}, lengths);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t L = lengths[static_cast<size_t>(b)];
    nn::RnnOutput alone = lstm(x.narrow(0, 0, L).narrow(1, b, 1));
    expect_near(vec(o.output.narrow(0, 0, L).narrow(1, b, 1).contiguous()), vec(alone.output), 1e-5);
    expect_near(vec(o.h_n.narrow(1, b, 1).contiguous()), vec(alone.h_n), 1e-5);
    expect_near(vec(o.c_n.narrow(1, b, 1).contiguous()), vec(alone.c_n), 1e-5);
    if (L < T) {
      for (double v : vec(o.output.narrow(0, L, T - L).narrow(1, b, 1).contiguous())) EXPECT_EQ(v, 0.0);
    }
  }
}

TEST(Rnn, InitialStatesMatter) {
  nn::GRU gru(2, 3, {.num_layers = 2});
  Tensor x = randn({3, 2, 2});
  Tensor h0 = randn({2, 2, 3});
  EXPECT_NE(vec(gru(x).h_n), vec(gru(x, {h0}).h_n));
  EXPECT_EQ(vec(gru(x).h_n), vec(gru(x, {zeros({2, 2, 3})}).h_n));
}

TEST(Rnn, DropoutBetweenLayersOnlyInTraining) {
  manual_seed(1);
  nn::LSTM drop(3, 4, {.num_layers = 2, .dropout = 0.5});
  nn::LSTM none(3, 4, {.num_layers = 2});
  none.load_state_dict(drop.state_dict());
  Tensor x = randn({4, 2, 3});
  EXPECT_NE(vec(drop(x).output), vec(none(x).output));
  drop.eval();
  EXPECT_EQ(vec(drop(x).output), vec(none(x).output));
}

TEST(Rnn, GradcheckBidirectionalMultiLayerWithLengths) {
  std::vector<int64_t> lengths{3, 1};
  for (int kind = 0; kind < 2; ++kind) {
    std::unique_ptr<nn::RNNBase> m;
    if (kind == 0)
      m = std::make_unique<nn::LSTM>(2, 2, nn::LSTMOptions{.num_layers = 2, .bidirectional = true});
    else
      m = std::make_unique<nn::GRU>(2, 2, nn::GRUOptions{.num_layers = 2, .bidirectional = true});
    m->to(DType::Float64);
    Tensor x = rand64({3, 2, 2}, 10 + kind);
    Tensor h0 = rand64({4, 2, 2}, 20 + kind);
    Tensor c0 = kind == 0 ? rand64({4, 2, 2}, 30) : Tensor();
    std::vector<Tensor> inputs{x, h0};
    if (c0.defined()) inputs.push_back(c0);
    for (const Tensor& p : m->parameters()) inputs.push_back(p);
    // Output sequence and final states together.
    GradcheckResult r = gradcheck(
        [&](const std::vector<Tensor>& in) {
          nn::RnnOutput o = (*m)(in[0], {in[1], c0.defined() ? in[2] : Tensor()}, lengths);
          Tensor parts = cat({o.output.flatten(), o.h_n.flatten()});
          return o.c_n.defined() ? cat({parts, o.c_n.flatten()}) : parts;
        },
        inputs);
    EXPECT_TRUE(r.ok) << m->type_name() << ": " << r.message;
  }
  nn::RNN rnn(2, 3);
  rnn.to(DType::Float64);
  std::vector<Tensor> in{rand64({3, 2, 2}, 40)};
  for (const Tensor& p : rnn.parameters()) in.push_back(p);
  GradcheckResult r = gradcheck([&](const std::vector<Tensor>& v) { return rnn(v[0]).output; }, in);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Rnn, Errors) {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  EXPECT_TRUE(has(error_of([&] { lstm(zeros({5, 2, 2})); }), "input_size = 3"));
  EXPECT_TRUE(has(error_of([&] { lstm(zeros({5, 2, 3}), {zeros({1, 2, 4})}); }), "h0 must be [2, 2, 4]"));
  EXPECT_TRUE(has(error_of([&] { lstm(zeros({5, 2, 3}), {}, {3}); }), "1 lengths for a batch of 2"));
  EXPECT_TRUE(has(error_of([&] { lstm(zeros({5, 2, 3}), {}, {3, 6}); }), "outside [1, 5]"));
  nn::GRU gru(3, 4);
  EXPECT_TRUE(has(error_of([&] { gru(zeros({5, 2, 3}), {Tensor(), zeros({1, 2, 4})}); }), "cell state"));
  EXPECT_TRUE(has(error_of([&] { lstm.weight_ih(2); }), "out of range"));
  EXPECT_TRUE(has(error_of([&] { lstm.weight_ih(0, true); }), "no reverse direction"));
  EXPECT_THROW(nn::LSTM(3, 4, {.dropout = 2.0}), Error);
  EXPECT_THROW(lstm(zeros({3})), Error);
}

TEST(Rnn, FunctionalRnnLayerIsTheModulesMath) {
  nn::LSTM lstm(3, 4);
  Tensor x = randn({5, 2, 3});
  nn::RnnOutput o = lstm(x);
  nn::F::RnnLayerResult r = nn::F::rnn_layer(nn::F::RnnMode::Lstm, x, lstm.weight_ih(0), lstm.weight_hh(0),
                                             lstm.bias_ih(0), lstm.bias_hh(0), Tensor(), Tensor());
  EXPECT_TRUE(equal(o.output, r.output));
  EXPECT_TRUE(equal(o.h_n[0], r.h_n));
  EXPECT_TRUE(equal(o.c_n[0], r.c_n));
}

// RnnSequence: an RNN as a Sequential element keeps the RNN's parameter names and values, returns
// its output sequence, follows to() and train(), and trains the RNN's own tensors.
TEST(Rnn, RnnSequenceIsTheRnnsOutputUnderItsNames) {
  manual_seed(5);
  auto lstm = nn::make<nn::LSTM>(3, 4, nn::LSTMOptions{.num_layers = 2, .batch_first = true, .dropout = 0.5});
  nn::Sequential seq({{"lstm", nn::make<nn::RnnSequence>(lstm)}});
  std::vector<std::string> names, want;
  for (auto& [n, t] : seq.named_parameters()) names.push_back(n);
  for (auto& [n, t] : lstm->named_parameters()) want.push_back("lstm." + n);
  EXPECT_EQ(names, want);
  seq.to(DType::Float64);
  EXPECT_EQ(lstm->weight_ih(0).dtype(), DType::Float64);  // the RNN's own tensors moved
  seq.eval();
  EXPECT_FALSE(lstm->is_training());
  Tensor x = randn({2, 5, 3}, {.dtype = DType::Float64});
  Tensor out = seq.forward(x);
  EXPECT_EQ(out.shape(), (Shape{2, 5, 4}));
  EXPECT_EQ(out.to_vector<double>(), lstm->forward(x).output.to_vector<double>());
  seq.train();
  EXPECT_TRUE(lstm->is_training());
  seq.forward(x).sum().backward();
  EXPECT_TRUE(lstm->weight_hh(1).grad().defined());
  EXPECT_THROW(nn::RnnSequence(nullptr), Error);
}
