// libtorch models for bench/train_text (see train_text_torch.h): torch::nn::Embedding ->
// torch::nn::LSTM (batch_first) -> torch::nn::Linear, exactly the layers and sizes of Ember's
// LstmLanguageModel and BiLstmClassifier, and of bench/ember_steps.cpp's LSTM classifier.
#include "train_text_torch.h"

#include <torch/torch.h>

namespace ember::bench::torch_side {

namespace {

struct LmNet : torch::nn::Module {
  torch::nn::Embedding embed{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
  explicit LmNet(const LstmLmShape& s) {
    embed = register_module("embed", torch::nn::Embedding(s.vocab, s.embed));
    lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(s.embed, s.hidden).batch_first(true)));
    head = register_module("head", torch::nn::Linear(s.hidden, s.vocab));
  }
  torch::Tensor forward(const torch::Tensor& x) { return head(std::get<0>(lstm(embed(x)))); }
};

struct BiNet : torch::nn::Module {
  torch::nn::Embedding embed{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
  explicit BiNet(const BiLstmShape& s) {
    embed = register_module("embed", torch::nn::Embedding(s.vocab, s.embed));
    lstm = register_module(
        "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(s.embed, s.hidden).batch_first(true).bidirectional(true)));
    head = register_module("head", torch::nn::Linear(2 * s.hidden, s.classes));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h_n = std::get<0>(std::get<1>(lstm(embed(x))));  // [2, B, H]
    return head(torch::cat({h_n[0], h_n[1]}, 1));
  }
};

struct ClsNet : torch::nn::Module {
  torch::nn::Embedding embed{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear head{nullptr};
  explicit ClsNet(const LstmClassifierShape& s) {
    embed = register_module("embed", torch::nn::Embedding(s.vocab, s.embed));
    lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(s.embed, s.hidden).batch_first(true)));
    head = register_module("head", torch::nn::Linear(s.hidden, s.vocab));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return head(std::get<0>(std::get<1>(lstm(embed(x))))[0]);  // h_n [1, B, H]: the last step
  }
};

// A training step on fixed random tokens [batch, seq] from `first_token` up: cross-entropy of the
// network's output, viewed as [targets, classes], against `targets` random classes; Adam.
template <class Net, class Shape>
std::function<void()> train_step(const Shape& s, uint64_t seed, int64_t first_token, int64_t targets, int64_t classes) {
  torch::manual_seed(seed);
  auto net = std::make_shared<Net>(s);
  auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::randint(first_token, s.vocab, {s.batch, s.seq}, torch::kLong);
  built_batch() = static_cast<int>(x.size(0));
  auto y = torch::randint(0, classes, {targets}, torch::kLong);
  return [=] {
    auto loss = torch::nn::functional::cross_entropy(net->forward(x).reshape({targets, classes}), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

}  // namespace

std::function<void()> make_lstm_classifier_step(const LstmClassifierShape& s, uint64_t seed) {
  return train_step<ClsNet>(s, seed, 0, s.batch, s.vocab);
}

std::function<void()> make_lstm_lm_step(const LstmLmShape& s, uint64_t seed) {
  return train_step<LmNet>(s, seed, 0, s.batch * s.seq, s.vocab);  // a target per token
}

std::function<void()> make_bilstm_step(const BiLstmShape& s, uint64_t seed) {
  return train_step<BiNet>(s, seed, 1, s.batch, s.classes);  // token 0 is padding
}

void set_threads(int n) {
  torch::set_num_threads(n);
}

const char* version() {
  return TORCH_VERSION;
}

}  // namespace ember::bench::torch_side
