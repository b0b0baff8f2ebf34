// Model and solver files (interop/model_file.h): the shipped files build the zoo's models weight for
// weight, a residual network runs its joins, optimizers and schedules come from the file, and every
// kind of mistake is an error that names the file, the line, the layer and the field.
#include "interop/model_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/autograd/grad_mode.h"
#include "interop/graph_net.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"
#include "test_helpers.h"

using namespace ember;
namespace fs = std::filesystem;
using test_util::has;

namespace {

std::string shipped(const std::string& name) {
  return std::string(EMBER_SOURCE_DIR) + "/models/" + name;
}

bool same_state(const nn::Module& a, const nn::Module& b) {
  const auto sa = a.state_dict(), sb = b.state_dict();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i) {
    if (sa[i].first != sb[i].first || sa[i].second.shape() != sb[i].second.shape()) return false;
    if (sa[i].second.to_vector<double>() != sb[i].second.to_vector<double>()) return false;
  }
  return true;
}

// Writes `text` to a file of its own and returns the error that loading and building it gives.
std::string error_for(const std::string& text) {
  static int n = 0;
  const fs::path path =
      fs::temp_directory_path() / ("ember_model_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".pbtxt");
  std::ofstream(path) << text;
  std::string message = "(no error)";
  try {
    const auto file = model_file::load(path.string());
    for (int i = 0; i < file.spec.network_size(); ++i) model_file::build_network(file, i);
    if (file.spec.has_classifier()) model_file::network_index(file, file.spec.classifier().network(), "classifier");
  } catch (const Error& e) {
    message = e.what();
    const std::string prefix = path.string() + ":";
    // The rest of the message, after "FILE:", for the tests to read; a missing prefix shows.
    message = message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : "NO FILE PREFIX: " + message;
  }
  fs::remove(path);
  return message;
}

// The error of building network 0 of `path` without a vocabulary.
std::string error_of_build(const std::string& path) {
  try {
    model_file::build_network(model_file::load(path), 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kHead = R"(version: 1
name: "t"
data { mnist {} batch_size: 8 }
classifier { solver { adam { lr: 0.001 } } }
)";

}  // namespace

TEST(ModelFile, TheShippedMnistCnnIsMnistCnnWeightForWeight) {
  const auto file = model_file::load(shipped("mnist_cnn.pbtxt"));
  manual_seed(5);
  auto net = model_file::build_network(file, 0);
  manual_seed(5);
  models::MnistCnn cnn;
  ASSERT_NE(dynamic_cast<nn::Sequential*>(net.get()), nullptr);  // a chain
  EXPECT_TRUE(same_state(*net, cnn));
  NoGradGuard ng;
  const Tensor x = randn({3, 1, 28, 28});
  EXPECT_EQ((*net)(x).to_vector<double>(), cnn(x).to_vector<double>());
}

TEST(ModelFile, LeNetAndTheMlpGanToo) {
  const auto lenet = model_file::load(shipped("lenet5.pbtxt"));
  manual_seed(6);
  auto net = model_file::build_network(lenet, 0);
  manual_seed(6);
  models::LeNet5 ref;
  EXPECT_TRUE(same_state(*net, ref));
  auto opt = model_file::make_optimizer(lenet, lenet.spec.classifier().solver(), "classifier", net->parameters(), 0);
  ASSERT_NE(dynamic_cast<optim::SGD*>(opt.get()), nullptr);
  EXPECT_EQ(opt->param_groups()[0].options.at("lr"), 0.05);
  EXPECT_EQ(opt->param_groups()[0].options.at("momentum"), 0.9);
  auto schedule = model_file::make_schedule(lenet.spec.classifier().solver(), *opt);
  ASSERT_NE(schedule, nullptr);
  schedule->step();
  schedule->step();
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options.at("lr"), 0.025);  // halved after 2 epochs
  // --lr replaces the file's rate.
  EXPECT_EQ(model_file::make_optimizer(lenet, lenet.spec.classifier().solver(), "classifier", net->parameters(), 0.3)
                ->param_groups()[0]
                .options.at("lr"),
            0.3);

  const auto gan = model_file::load(shipped("mlp_gan.pbtxt"));
  manual_seed(7);
  auto g = model_file::build_network(gan, model_file::network_index(gan, "generator", "gan"));
  auto d = model_file::build_network(gan, model_file::network_index(gan, "discriminator", "gan"));
  manual_seed(7);
  models::MlpGenerator g_ref;
  models::MlpDiscriminator d_ref;
  EXPECT_TRUE(same_state(*g, g_ref));
  EXPECT_TRUE(same_state(*d, d_ref));
  EXPECT_EQ((*g)(randn({2, 100})).shape(), (Shape{2, 1, 28, 28}));
}

TEST(ModelFile, TheDcganToo) {
  const auto file = model_file::load(shipped("dcgan.pbtxt"));
  manual_seed(8);
  auto g = model_file::build_network(file, model_file::network_index(file, "generator", "gan"));
  auto d = model_file::build_network(file, model_file::network_index(file, "discriminator", "gan"));
  manual_seed(8);
  models::DcganGenerator g_ref;
  models::DcganDiscriminator d_ref;
  EXPECT_TRUE(same_state(*g, g_ref));
  EXPECT_TRUE(same_state(*d, d_ref));
  g->eval(), g_ref.eval();
  NoGradGuard ng;
  const Tensor z = randn({2, 100});
  EXPECT_EQ((*g)(z).to_vector<double>(), g_ref(z).to_vector<double>());
}

TEST(ModelFile, AResidualNetworkRunsItsJoins) {
  const auto file = model_file::load(shipped("residual_cnn.pbtxt"));
  auto net = model_file::build_network(file, 0);
  auto* graph = dynamic_cast<nn::GraphNet*>(net.get());
  ASSERT_NE(graph, nullptr);
  net->eval();
  NoGradGuard ng;
  const Tensor x = randn({2, 1, 28, 28});
  auto& m = *graph;
  auto layer = [&](const std::string& name) -> nn::Module& { return m.child(name); };
  Tensor h = layer("pool0")(layer("relu0")(layer("bn0")(layer("stem")(x))));
  Tensor r = layer("bn2")(layer("conv2")(layer("relu1")(layer("bn1")(layer("conv1")(h)))));
  Tensor y = layer("head")(layer("flatten")(layer("gap")(layer("pool2")(layer("relu2")(h + r)))));
  EXPECT_EQ((*net)(x).to_vector<double>(), y.to_vector<double>());
  EXPECT_EQ(net->num_parameters(), 320 + 9248 * 2 + 3 * 64 + 330);
}

TEST(ModelFile, InitialisationsReplaceTheDefaultOnes) {
  const fs::path path = fs::temp_directory_path() / ("ember_model_init_" + std::to_string(::getpid()) + ".pbtxt");
  std::ofstream(path) << kHead << R"(network {
  name: "net"
  input_shape: [64]
  layer { name: "a" linear { out_features: 256 } weight_init { normal { std: 0.02 } } bias_init { constant: 0.5 } }
  layer { name: "b" linear { out_features: 8 } weight_init { xavier_uniform { gain: 2 } } }
})";
  const auto file = model_file::load(path.string());
  fs::remove(path);
  auto net = model_file::build_network(file, 0);
  auto& seq = dynamic_cast<nn::Sequential&>(*net);
  const auto& a = dynamic_cast<nn::Linear&>(seq.child("a"));
  const auto& b = dynamic_cast<nn::Linear&>(seq.child("b"));
  const double sd = std::sqrt(var(a.weight).item());
  EXPECT_NEAR(sd, 0.02, 0.002);  // 16,384 draws
  for (double v : a.bias.to_vector<double>()) EXPECT_EQ(v, 0.5);
  // Xavier with gain 2 over fan-in 256 and fan-out 8: U(-bound, bound), bound = 2 sqrt(6 / 264).
  const double bound = 2 * std::sqrt(6.0 / 264.0);
  EXPECT_LE(b.weight.abs().max().item(), bound);
  EXPECT_GT(b.weight.abs().max().item(), 0.9 * bound);
  // What has no weight has nothing to initialise.
  EXPECT_TRUE(
      has(error_for(std::string(kHead) + "network {\n  name: \"n\"\n  input_shape: [4]\n"
                                         "  layer { name: \"r\" relu {}\n    weight_init { constant: 1 } }\n}\n"),
          "9: network 'n', layer 'r' (relu): the layer has no weight to initialise"));
}

TEST(ModelFile, TextNetworksTakeTheirSizesFromTheVocabulary) {
  const auto file = model_file::load(shipped("lstm_lm.pbtxt"));
  ASSERT_TRUE(file.spec.has_language_model());
  manual_seed(9);
  auto net = model_file::build_network(file, 0, 57);
  manual_seed(9);
  models::LstmLanguageModel lm({.vocab_size = 57, .embed_dim = 64, .hidden = 256, .layers = 1});
  auto ref = lm.as_sequential();  // the names lstm_lm trains and checkpoints under
  EXPECT_TRUE(same_state(*net, *ref));
  NoGradGuard ng;
  net->eval(), ref->eval();
  const Tensor tokens = randint(0, 57, {2, 100}, {.dtype = DType::Int64});
  const Tensor out = (*net)(tokens);
  EXPECT_EQ(out.shape(), (Shape{2, 100, 57}));
  EXPECT_EQ(out.to_vector<double>(), (*ref)(tokens).to_vector<double>());
  // Without a text source, nothing says how large the vocabulary is.
  const std::string e = error_of_build(shipped("lstm_lm.pbtxt"));
  EXPECT_TRUE(has(e, "layer 'embed' (embedding): sized by the vocabulary, which only a text data source has")) << e;
}

TEST(ModelFile, EveryMistakeNamesTheFileLineLayerAndField) {
  const std::string net_head = std::string(kHead) + "network {\n  name: \"net\"\n  input_shape: [1, 28, 28]\n";
  // Syntax, an unknown layer kind, an unknown field, a value of the wrong type: Protobuf's messages.
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"c\" conv3d { out_channels: 4 } }\n}\n"),
                  "8:28: Message type \"ember.train_file.Layer\" has no field named \"conv3d\""))
      << error_for(net_head + "  layer { name: \"c\" conv3d { out_channels: 4 } }\n}\n");
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"c\" conv2d { out_channels: \"four\" kernel: [3] } }\n}\n"),
                  "8:44: Expected integer"));
  // An unclosed brace: the parser says where the file ended.
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"c\" conv2d { out_channels: 4 kernel: [3] }\n}\n"),
                  "10:1: Expected identifier"));
  // A missing field, on the layer's line.
  EXPECT_TRUE(
      has(error_for(net_head + "  layer { name: \"r\" relu {} }\n  layer { name: \"c\" conv2d { kernel: [3] } }\n}\n"),
          "9: network 'net', layer 'c' (conv2d): out_channels is missing"));
  // A layer without a kind.
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"x\" }\n}\n"),
                  "8: network 'net', layer 'x' (no kind): the layer has no kind"));
  // Shapes that do not connect: a convolution after the flatten.
  const std::string bad_shape = error_for(net_head +
                                          "  layer { name: \"f\" flatten {} }\n"
                                          "  layer { name: \"c\" conv2d { out_channels: 4 kernel: [3] } }\n}\n");
  EXPECT_TRUE(has(bad_shape, "9: network 'net', layer 'c' (conv2d): its input is [1, 784] (expected 4 dimensions"))
      << bad_shape;
  const std::string bad_add = error_for(net_head +
                                        "  layer { name: \"p\" max_pool2d { kernel: [2] } }\n"
                                        "  layer { name: \"s\" add {} input: [\"input\", \"p\"] }\n}\n");
  EXPECT_TRUE(has(bad_add, "9: network 'net', layer 's' (add): cannot take its input")) << bad_add;
  EXPECT_TRUE(has(bad_add, "[1, 1, 28, 28] and [1, 1, 14, 14] differ")) << bad_add;
  // An input that names no earlier layer, on the line of `input`.
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"r\" relu {}\n    input: [\"later\"] }\n}\n"),
                  "9: network 'net', layer 'r' (relu): input 'later' names no earlier layer"));
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"r\" relu {} }\n  layer { name: \"r\" tanh {} }\n}\n"),
                  "layer 'r' (tanh): a second layer of this name"));
  EXPECT_TRUE(has(error_for(net_head + "  layer { name: \"p\" max_pool2d { kernel: [2, 2, 2] } }\n}\n"),
                  "kernel has 3 values (expected 1 or 2)"));
  // The file as a whole.
  EXPECT_TRUE(has(error_for("name: \"t\"\n"), "version is missing"));
  EXPECT_TRUE(has(error_for("version: 2\nname: \"t\"\n"), "1: version 2 is newer than this Ember reads (1)"));
  EXPECT_TRUE(has(
      error_for("version: 1\nname: \"t\"\nnetwork { name: \"n\" input_shape: [2] layer { name: \"r\" relu {} } }\n"),
      "no task"));
  EXPECT_TRUE(
      has(error_for(std::string(kHead) + "network { name: \"a\" input_shape: [2] layer { name: \"r\" relu {} } }\n"
                                         "network { name: \"b\" input_shape: [2] layer { name: \"r\" relu {} } }\n"),
          "4: classifier names no network, and the file has 2"));
  EXPECT_TRUE(has(error_for(std::string(kHead) + "network { name: \"a\" layer { name: \"r\" relu {} } }\n"),
                  "5: network 'a': input_shape is missing"));
  EXPECT_THROW(model_file::load("/nonexistent/model.pbtxt"), Error);
}
