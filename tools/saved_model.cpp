#include "tools/saved_model.h"

#include <memory>

#include "core/ops.h"
#include "interop/model_file.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"
#include "tools/flags.h"

namespace ember::tools {

const char* const kZooModels =
    "mnist_cnn, lenet5, mlp_generator, mlp_discriminator, dcgan_generator, dcgan_discriminator, lstm_lm, "
    "bilstm_classify";

namespace {

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

// Loads the checkpoint's weights into `m` (strictly), saying which file did not fit `what`.
void load_weights(nn::Module& m, const CheckpointContents& c, const std::string& file, const std::string& what) {
  try {
    m.load_state_dict(c.model_state(), true);
  } catch (const Error& e) {
    EMBER_FAIL(file, ": its weights are not those of ", what, ": ", e.what());
  }
}

}  // namespace

std::shared_ptr<nn::Module> zoo_model(const std::string& name, SavedCheckpoint& ckpt, int64_t batch, int64_t seq,
                                      std::vector<Tensor>& example) {
  const CheckpointContents& c = ckpt.contents();
  const std::string& file = ckpt.path();
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
    throw UsageError("--model: unknown model '" + name + "' (expected one of " + kZooModels + ")");
  }
  load_weights(*m, c, file, "--model " + name);
  return m;
}

std::shared_ptr<nn::Module> model_file_network(const std::string& model_file, const std::string& network,
                                               SavedCheckpoint& ckpt, int64_t batch, std::vector<Tensor>& example) {
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
  const CheckpointContents& c = ckpt.contents();
  const std::string& file = ckpt.path();
  int64_t vocabulary = 0;
  if (n.layer(0).has_embedding() && !n.layer(0).embedding().has_num_embeddings())
    vocabulary = need(c, file, n.layer(0).name() + ".weight").size(0);
  auto net = model_file::build_network(mf, index, vocabulary);
  load_weights(*net, c, file, "network '" + n.name() + "' of " + model_file);
  example = {model_file::example_input(n, batch)};
  return net;
}

}  // namespace ember::tools
