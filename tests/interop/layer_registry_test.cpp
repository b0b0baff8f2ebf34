// The layer registries (interop/model_file_layers.h, interop/onnx_layers.h): every kind of layer a
// model file can write registers how it is built, and every module of the model zoo and of the
// shipped model files registers its ONNX exporter. A layer added without its registration (in
// interop/layers/) fails here, naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "interop/graph_net.h"
#include "interop/model_file.h"
#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"

using namespace ember;

namespace {

std::string shipped(const std::string& name) {
  return std::string(EMBER_SOURCE_DIR) + "/models/" + name;
}

// `m` and what emit_module reaches from it (a Sequential's elements, a GraphNet's layers) have
// exporters; returns the paths of those that have none.
void missing_exporters(nn::Module& m, const std::string& path, std::vector<std::string>& missing) {
  if (!onnx::find_exporter(m)) missing.push_back(path + " (" + m.type_name() + ")");
  if (auto* seq = dynamic_cast<nn::Sequential*>(&m)) {
    for (const auto& [name, child] : seq->named_children()) missing_exporters(*child, path + "." + name, missing);
  } else if (auto* net = dynamic_cast<nn::GraphNet*>(&m)) {
    for (const auto& node : net->nodes())
      if (node.module) missing_exporters(*node.module, path + "." + node.name, missing);
  }
}

}  // namespace

TEST(LayerRegistry, EveryKindOfAModelFileLayerIsRegisteredOnce) {
  const auto* kinds = train_file::Layer::descriptor()->FindOneofByName("kind");
  ASSERT_NE(kinds, nullptr);
  ASSERT_GT(kinds->field_count(), 0);
  for (int i = 0; i < kinds->field_count(); ++i) {
    const auto* field = kinds->field(i);
    const auto kind = static_cast<train_file::Layer::KindCase>(field->number());
    const model_file::FileLayer* layer = model_file::find_layer(kind);
    ASSERT_NE(layer, nullptr) << "layer kind '" << field->name()
                              << "' has no model-file registration (model_file::LayerRegistration in interop/layers/)";
    // A module's builder, or a join: one of the two.
    EXPECT_NE(layer->build != nullptr, layer->join != nn::GraphNet::Join::None) << field->name();
  }
  EXPECT_EQ(model_file::duplicate_layers(), std::vector<std::string>{});
}

TEST(LayerRegistry, EveryModuleOfTheZooAndTheShippedFilesHasAnExporter) {
  EXPECT_EQ(onnx::duplicate_exporters(), std::vector<std::string>{});
  std::vector<std::string> missing;
  missing_exporters(*std::make_shared<models::MnistCnn>(), "MnistCnn", missing);
  missing_exporters(*std::make_shared<models::LeNet5>(), "LeNet5", missing);
  missing_exporters(*std::make_shared<models::MlpGenerator>(), "MlpGenerator", missing);
  missing_exporters(*std::make_shared<models::MlpDiscriminator>(), "MlpDiscriminator", missing);
  missing_exporters(*std::make_shared<models::DcganGenerator>(), "DcganGenerator", missing);
  missing_exporters(*std::make_shared<models::DcganGenerator>(models::DcganGeneratorOptions{.batch_norm = false}),
                    "DcganGenerator(no batch norm)", missing);
  missing_exporters(*std::make_shared<models::DcganDiscriminator>(), "DcganDiscriminator", missing);
  models::LstmLanguageModel lm({.vocab_size = 20, .embed_dim = 8, .hidden = 8});
  missing_exporters(*lm.as_sequential(), "LstmLanguageModel.as_sequential()", missing);
  // The text models' own exporters (onnx_export.cpp) emit their LSTMs with emit_rnn, and the rest
  // through the registry.
  missing_exporters(lm.embed, "LstmLanguageModel.embed", missing);
  missing_exporters(lm.head, "LstmLanguageModel.head", missing);
  models::BiLstmClassifier clf({.vocab_size = 20, .embed_dim = 8, .hidden = 8});
  missing_exporters(clf.embed, "BiLstmClassifier.embed", missing);
  missing_exporters(clf.head, "BiLstmClassifier.head", missing);
  for (const char* name :
       {"mnist_cnn.pbtxt", "lenet5.pbtxt", "residual_cnn.pbtxt", "mlp_gan.pbtxt", "dcgan.pbtxt", "lstm_lm.pbtxt"}) {
    const model_file::LoadedFile file = model_file::load(shipped(name));
    for (int i = 0; i < file.spec.network_size(); ++i) {
      auto net = model_file::build_network(file, i, /*vocabulary=*/20);
      missing_exporters(*net, std::string(name) + ":" + file.spec.network(i).name(), missing);
    }
  }
  EXPECT_EQ(missing, std::vector<std::string>{}) << "modules without an onnx::ExporterRegistration (interop/layers/)";
}

// A module that derives from a registered type exports as that type (the zoo's Sequential
// subclasses); one of no registered type has no exporter.
TEST(LayerRegistry, ADerivedModuleTakesItsBaseTypesExporter) {
  models::MnistCnn net;
  const onnx::Exporter* e = onnx::find_exporter(net);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->name, "Sequential");
  nn::BatchNorm2d bn(4);
  ASSERT_NE(onnx::find_exporter(bn), nullptr);
  EXPECT_EQ(onnx::find_exporter(bn)->name, "BatchNorm1d/2d");
  nn::Lambda twice([](const Tensor& x) { return x * 2.0; });
  EXPECT_EQ(onnx::find_exporter(twice), nullptr);
}
