#include "bench/ember_steps.h"

#include <memory>
#include <vector>

#include "bench/workloads.h"
#include "core/ops.h"
#include "core/step_graph.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"

namespace ember::bench {
namespace {

constexpr int kWarmupSteps = 3;  // kernel choices, library handles and the allocator settle first

// The step of a model trained on (x, y): `loss_of` runs forward and loss. Eager: forward, loss,
// zero_grad, backward, optimizer. With a CUDA graph: forward, loss and backward are captured with
// the gradients unset, so the capture allocates them in its pool and every replay writes them in
// place (no zero_grad between replays); each call copies the batch into the static x and y,
// replays, and runs the optimizer eagerly.
std::function<void()> loss_step(std::function<Tensor(const Tensor&, const Tensor&)> loss_of,
                                std::shared_ptr<optim::Optimizer> opt, Tensor x, Tensor y, const StepOptions& o) {
  built_batch() = static_cast<int>(x.size(0));
  auto eager = [=] {
    Tensor loss = loss_of(x, y);
    opt->zero_grad();
    loss.backward();
    opt->step();
  };
  if (!o.cuda_graph) return eager;
  for (int i = 0; i < kWarmupSteps; ++i) eager();
  opt->zero_grad();
  std::shared_ptr<StepGraph> graph = capture_step_graph(o.device, [=] { loss_of(x, y).backward(); });
  // The batch a loader would hand over: other memory, copied in before each replay.
  Tensor next_x = x.clone(), next_y = y.clone();
  return [=]() mutable {
    x.copy_(next_x);
    y.copy_(next_y);
    graph->replay();
    opt->step();
  };
}

// A GAN's whole step in a graph: captured after the warm-up (refused: it draws noise).
std::function<void()> maybe_graph(std::function<void()> step, const StepOptions& o) {
  if (!o.cuda_graph) return step;
  for (int i = 0; i < kWarmupSteps; ++i) step();
  std::shared_ptr<StepGraph> graph = capture_step_graph(o.device, step);
  return [graph] { graph->replay(); };
}

// A GAN pair owned together (modules cannot move, so they live behind shared_ptrs).
template <class G, class D>
std::function<void()> ember_gan_step(int batch, bool logits, const StepOptions& o) {
  auto g = std::make_shared<G>();
  auto d = std::make_shared<D>();
  g->to(o.device);
  d->to(o.device);
  auto og = std::make_shared<optim::Adam>(g->parameters(), optim::AdamOptions{.lr = 2e-4, .beta1 = 0.5});
  auto od = std::make_shared<optim::Adam>(d->parameters(), optim::AdamOptions{.lr = 2e-4, .beta1 = 0.5});
  const TensorOptions on{.device = o.device};
  Tensor real = rand({batch, 1, 28, 28}, on) * 2.0 - 1.0;
  built_batch() = static_cast<int>(real.size(0));
  Tensor ones_t = ones({batch, 1}, on), zeros_t = zeros({batch, 1}, on);
  auto loss = [logits](const Tensor& out, const Tensor& t) {
    return logits ? nn::binary_cross_entropy_with_logits(out, t) : nn::binary_cross_entropy(out, t);
  };
  return maybe_graph(
      [=] {
        Tensor fake = (*g)(randn({batch, models::kNoiseDim}, on));
        Tensor ld = loss((*d)(real), ones_t) + loss((*d)(fake.detach()), zeros_t);
        od->zero_grad();
        ld.backward();
        od->step();
        Tensor lg = loss((*d)(fake), ones_t);
        og->zero_grad();
        lg.backward();
        og->step();
      },
      o);
}

std::function<void()> image_step(const std::string& model, int batch, const StepOptions& o) {
  manual_seed(0);
  if (model == "mnist_cnn") {
    auto net = std::make_shared<models::MnistCnn>();
    nn::fuse(*net);  // as the example trains it
    net->to(o.device);
    auto opt = std::make_shared<optim::Adam>(net->parameters(), optim::AdamOptions{.lr = 1e-3});
    Tensor x = randn({batch, 1, 28, 28}, {.device = o.device});
    Tensor y = randint(0, 10, {batch}, {.dtype = DType::Int64, .device = o.device});
    return loss_step([net](const Tensor& xb, const Tensor& yb) { return cross_entropy((*net)(xb), yb); }, opt, x, y, o);
  }
  if (model == "mlp_gan") return ember_gan_step<models::MlpGenerator, models::MlpDiscriminator>(batch, false, o);
  if (model == "dcgan") return ember_gan_step<models::DcganGenerator, models::DcganDiscriminator>(batch, true, o);
  return {};
}

std::function<void()> ember_lm_step(const LstmLmShape& s, const StepOptions& o) {
  manual_seed(1);
  auto lm = std::make_shared<models::LstmLanguageModel>(
      models::LstmLmOptions{.vocab_size = s.vocab, .embed_dim = s.embed, .hidden = s.hidden});
  lm->to(o.device);
  auto opt = std::make_shared<optim::Adam>(lm->parameters(), optim::AdamOptions{.lr = 1e-3});
  const TensorOptions ints{.dtype = DType::Int64, .device = o.device};
  Tensor x = randint(0, s.vocab, {s.batch, s.seq}, ints), y = randint(0, s.vocab, {s.batch * s.seq}, ints);
  return loss_step(
      [lm, s](const Tensor& xb, const Tensor& yb) {
        return cross_entropy((*lm)(xb).reshape({s.batch * s.seq, s.vocab}), yb);
      },
      opt, x, y, o);
}

std::function<void()> ember_bilstm_step(const BiLstmShape& s, const StepOptions& o) {
  manual_seed(1);
  auto clf = std::make_shared<models::BiLstmClassifier>(
      models::BiLstmOptions{.vocab_size = s.vocab, .embed_dim = s.embed, .hidden = s.hidden, .classes = s.classes});
  clf->to(o.device);
  auto opt = std::make_shared<optim::Adam>(clf->parameters(), optim::AdamOptions{.lr = 1e-3});
  const TensorOptions ints{.dtype = DType::Int64, .device = o.device};
  Tensor x = randint(1, s.vocab, {s.batch, s.seq}, ints), y = randint(0, s.classes, {s.batch}, ints);
  // Every sequence full length: the libtorch side runs the same unpacked batch.
  std::vector<int64_t> lengths(static_cast<size_t>(s.batch), s.seq);
  return loss_step(
      [clf, lengths](const Tensor& xb, const Tensor& yb) { return cross_entropy(clf->forward(xb, lengths), yb); }, opt,
      x, y, o);
}

// Embedding -> LSTM -> a dense layer over the vocabulary on the last step (h_n), cross-entropy.
std::function<void()> ember_lstm_classifier_step(const LstmClassifierShape& s, const StepOptions& o) {
  manual_seed(1);
  auto embed = std::make_shared<nn::Embedding>(s.vocab, s.embed);
  auto lstm = std::make_shared<nn::LSTM>(s.embed, s.hidden, nn::LSTMOptions{.batch_first = true});
  auto head = std::make_shared<nn::Linear>(s.hidden, s.vocab);
  std::vector<Tensor> params;
  for (const auto& m : std::vector<std::shared_ptr<nn::Module>>{embed, lstm, head}) {
    m->to(o.device);
    for (const Tensor& p : m->parameters()) params.push_back(p);
  }
  auto opt = std::make_shared<optim::Adam>(params, optim::AdamOptions{.lr = 1e-3});
  const TensorOptions ints{.dtype = DType::Int64, .device = o.device};
  Tensor x = randint(0, s.vocab, {s.batch, s.seq}, ints), y = randint(0, s.vocab, {s.batch}, ints);
  return loss_step(
      [embed, lstm, head](const Tensor& xb, const Tensor& yb) {
        return cross_entropy(head->forward(lstm->forward(embed->forward(xb)).h_n[0]), yb);
      },
      opt, x, y, o);
}

}  // namespace

std::function<void()> ember_train_step(const std::string& workload, const StepOptions& o) {
  auto with = [&o](auto shape) {
    if (o.batch > 0) shape.batch = o.batch;
    return shape;
  };
  if (workload == "lstm_lm") return ember_lm_step(with(LstmLmShape{}), o);
  if (workload == "lstm_classifier") return ember_lstm_classifier_step(with(LstmClassifierShape{}), o);
  if (workload == "bilstm") return ember_bilstm_step(with(BiLstmShape{}), o);
  return image_step(workload, o.batch > 0 ? o.batch : 64, o);
}

}  // namespace ember::bench
