#include "bench/ember_steps.h"

#include <memory>
#include <vector>

#include "bench/workloads.h"
#include "core/ops.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"

namespace ember::bench {
namespace {

// A GAN pair owned together (modules cannot move, so they live behind shared_ptrs).
template <class G, class D>
std::function<void()> ember_gan_step(int batch, bool logits) {
  auto g = std::make_shared<G>();
  auto d = std::make_shared<D>();
  auto og = std::make_shared<optim::Adam>(g->parameters(), optim::AdamOptions{.lr = 2e-4, .beta1 = 0.5});
  auto od = std::make_shared<optim::Adam>(d->parameters(), optim::AdamOptions{.lr = 2e-4, .beta1 = 0.5});
  Tensor real = rand({batch, 1, 28, 28}) * 2.0 - 1.0;
  built_batch() = static_cast<int>(real.size(0));
  Tensor ones_t = ones({batch, 1}), zeros_t = zeros({batch, 1});
  auto loss = [logits](const Tensor& out, const Tensor& t) {
    return logits ? nn::binary_cross_entropy_with_logits(out, t) : nn::binary_cross_entropy(out, t);
  };
  return [=] {
    Tensor fake = (*g)(randn({batch, models::kNoiseDim}));
    Tensor ld = loss((*d)(real), ones_t) + loss((*d)(fake.detach()), zeros_t);
    od->zero_grad();
    ld.backward();
    od->step();
    Tensor lg = loss((*d)(fake), ones_t);
    og->zero_grad();
    lg.backward();
    og->step();
  };
}

std::function<void()> image_step(const std::string& model, int batch) {
  manual_seed(0);
  if (model == "mnist_cnn") {
    auto net = std::make_shared<models::MnistCnn>();
    nn::fuse(*net);  // as the example trains it
    auto opt = std::make_shared<optim::Adam>(net->parameters(), optim::AdamOptions{.lr = 1e-3});
    Tensor x = randn({batch, 1, 28, 28}), y = randint(0, 10, {batch});
    built_batch() = static_cast<int>(x.size(0));
    return [=] {
      Tensor loss = cross_entropy((*net)(x), y);
      opt->zero_grad();
      loss.backward();
      opt->step();
    };
  }
  if (model == "mlp_gan") return ember_gan_step<models::MlpGenerator, models::MlpDiscriminator>(batch, false);
  if (model == "dcgan") return ember_gan_step<models::DcganGenerator, models::DcganDiscriminator>(batch, true);
  return {};
}

std::function<void()> ember_lm_step(const LstmLmShape& s) {
  manual_seed(1);
  auto lm = std::make_shared<models::LstmLanguageModel>(
      models::LstmLmOptions{.vocab_size = s.vocab, .embed_dim = s.embed, .hidden = s.hidden});
  auto opt = std::make_shared<optim::Adam>(lm->parameters(), optim::AdamOptions{.lr = 1e-3});
  Tensor x = randint(0, s.vocab, {s.batch, s.seq}), y = randint(0, s.vocab, {s.batch * s.seq});
  built_batch() = static_cast<int>(x.size(0));
  return [=] {
    Tensor loss = cross_entropy((*lm)(x).reshape({s.batch * s.seq, s.vocab}), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

std::function<void()> ember_bilstm_step(const BiLstmShape& s) {
  manual_seed(1);
  auto clf = std::make_shared<models::BiLstmClassifier>(
      models::BiLstmOptions{.vocab_size = s.vocab, .embed_dim = s.embed, .hidden = s.hidden, .classes = s.classes});
  auto opt = std::make_shared<optim::Adam>(clf->parameters(), optim::AdamOptions{.lr = 1e-3});
  Tensor x = randint(1, s.vocab, {s.batch, s.seq}), y = randint(0, s.classes, {s.batch});
  built_batch() = static_cast<int>(x.size(0));
  // Every sequence full length: the libtorch side runs the same unpacked batch.
  std::vector<int64_t> lengths(static_cast<size_t>(s.batch), s.seq);
  return [=] {
    Tensor loss = cross_entropy(clf->forward(x, lengths), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

// Embedding -> LSTM -> a dense layer over the vocabulary on the last step (h_n), cross-entropy.
std::function<void()> ember_lstm_classifier_step(const LstmClassifierShape& s) {
  manual_seed(1);
  auto embed = std::make_shared<nn::Embedding>(s.vocab, s.embed);
  auto lstm = std::make_shared<nn::LSTM>(s.embed, s.hidden, nn::LSTMOptions{.batch_first = true});
  auto head = std::make_shared<nn::Linear>(s.hidden, s.vocab);
  std::vector<Tensor> params = embed->parameters();
  for (const auto& m : std::vector<std::shared_ptr<nn::Module>>{lstm, head})
    for (const Tensor& p : m->parameters()) params.push_back(p);
  auto opt = std::make_shared<optim::Adam>(params, optim::AdamOptions{.lr = 1e-3});
  Tensor x = randint(0, s.vocab, {s.batch, s.seq}), y = randint(0, s.vocab, {s.batch});
  built_batch() = static_cast<int>(x.size(0));
  return [=] {
    Tensor loss = cross_entropy(head->forward(lstm->forward(embed->forward(x)).h_n[0]), y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
}

}  // namespace

std::function<void()> ember_train_step(const std::string& workload, int batch) {
  auto with = [batch](auto shape) {
    if (batch > 0) shape.batch = batch;
    return shape;
  };
  if (workload == "lstm_lm") return ember_lm_step(with(LstmLmShape{}));
  if (workload == "lstm_classifier") return ember_lstm_classifier_step(with(LstmClassifierShape{}));
  if (workload == "bilstm") return ember_bilstm_step(with(BiLstmShape{}));
  return image_step(workload, batch > 0 ? batch : 64);
}

}  // namespace ember::bench
