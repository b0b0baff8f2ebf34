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

}  // namespace

std::function<void()> make_lstm_classifier_step(const LstmClassifierShape& s, uint64_t seed) {
  torch::manual_seed(seed);
  auto net = std::make_shared<ClsNet>(s);
  auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::randint(0, s.vocab, {s.batch, s.seq}, torch::kLong);
  built_batch() = static_cast<int>(x.size(0));
  auto y = torch::randint(0, s.vocab, {s.batch}, torch::kLong);
  return [=] {
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

std::function<void()> make_lstm_lm_step(const LstmLmShape& s, uint64_t seed) {
  torch::manual_seed(seed);
  auto net = std::make_shared<LmNet>(s);
  auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::randint(0, s.vocab, {s.batch, s.seq}, torch::kLong);
  built_batch() = static_cast<int>(x.size(0));
  auto y = torch::randint(0, s.vocab, {s.batch * s.seq}, torch::kLong);
  return [=] {
    auto logits = net->forward(x).reshape({s.batch * s.seq, s.vocab});
    auto loss = torch::nn::functional::cross_entropy(logits, y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

std::function<void()> make_bilstm_step(const BiLstmShape& s, uint64_t seed) {
  torch::manual_seed(seed);
  auto net = std::make_shared<BiNet>(s);
  auto opt = std::make_shared<torch::optim::Adam>(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::randint(1, s.vocab, {s.batch, s.seq}, torch::kLong);
  built_batch() = static_cast<int>(x.size(0));
  auto y = torch::randint(0, s.classes, {s.batch}, torch::kLong);
  return [=] {
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

void set_threads(int n) {
  torch::set_num_threads(n);
}

const char* version() {
  return TORCH_VERSION;
}

}  // namespace ember::bench::torch_side
