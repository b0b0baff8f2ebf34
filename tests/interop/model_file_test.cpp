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
#include "interop/onnx_export.h"
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

// `text` loaded as a model file (of its own, removed after).
model_file::LoadedFile load_text(const std::string& text) {
  static int n = 0;
  const fs::path path = fs::temp_directory_path() /
                        ("ember_model_ok_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".pbtxt");
  std::ofstream(path) << text;
  auto file = model_file::load(path.string());
  fs::remove(path);
  return file;
}

// The ONNX attribute `name` of the first node of type `op`.
int64_t onnx_attribute(const onnx_schema::ModelProto& m, const std::string& op, const std::string& name) {
  for (const auto& node : m.graph().node())
    if (node.op_type() == op)
      for (const auto& a : node.attribute())
        if (a.name() == name) return a.i();
  ADD_FAILURE() << "no " << op << " with " << name;
  return -100;
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

// `softmax {}` and `log_softmax {}` normalise each example over its classes (the last dimension),
// never over the batch: an example's output is what it gets alone, and ONNX gets axis -1.
TEST(ModelFile, SoftmaxesNormaliseEachExampleOverItsClasses) {
  const auto file = load_text(std::string(kHead) + R"(network {
  name: "net"
  input_shape: [5]
  layer { name: "fc" linear { out_features: 3 } }
  layer { name: "p" softmax {} }
  layer { name: "lp" log_softmax {} }
})");
  auto net = model_file::build_network(file, 0);
  auto& seq = dynamic_cast<nn::Sequential&>(*net);
  EXPECT_EQ(dynamic_cast<nn::Softmax&>(seq.child("p")).dim, -1);
  EXPECT_EQ(dynamic_cast<nn::LogSoftmax&>(seq.child("lp")).dim, -1);
  NoGradGuard ng;
  const Tensor x = randn({4, 5});
  const Tensor y = (*net)(x);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i].exp().sum().item(), 1.0, 1e-5);
    const auto alone = (*net)(x.narrow(0, i, 1)).to_vector<double>(), in_batch = y[i].to_vector<double>();
    ASSERT_EQ(alone.size(), in_batch.size());
    for (size_t k = 0; k < alone.size(); ++k) EXPECT_NEAR(alone[k], in_batch[k], 1e-6);
  }
  const auto m = onnx::to_onnx(*net, {randn({2, 5})});
  EXPECT_EQ(onnx_attribute(m, "Softmax", "axis"), -1);
  EXPECT_EQ(onnx_attribute(m, "LogSoftmax", "axis"), -1);
  // An explicit dimension stays; the batch's is refused.
  EXPECT_EQ(dynamic_cast<nn::Softmax&>(
                dynamic_cast<nn::Sequential&>(
                    *model_file::build_network(
                        load_text(std::string(kHead) + "network { name: \"n\" input_shape: [5] layer { name: \"p\" "
                                                       "softmax { dim: 1 } } }\n"),
                        0))
                    .child("p"))
                .dim,
            1);
  const std::string e = error_for(std::string(kHead) +
                                  "network {\n  name: \"n\"\n  input_shape: [5]\n  layer { name: \"p\" log_softmax { "
                                  "dim: 0 } }\n}\n");
  EXPECT_TRUE(has(e,
                  "8: network 'n', layer 'p' (log_softmax): dim is 0 (invalid: expected a dimension other than 0, "
                  "the batch"))
      << e;
  EXPECT_TRUE(has(error_for(std::string(kHead) + "network { name: \"n\" input_shape: [5] layer { name: \"p\" softmax { "
                                                 "dim: 2 } } }\n"),
                  "dim is 2 (invalid: expected one of its input's 2 dimensions (batch included): 1 to 1"));
}

// `concat {}` joins along the channels (dim 1), not the batch: two [N, 4, 6, 6] feature maps make
// [N, 8, 6, 6], two [N, F] vectors [N, F1 + F2]; ONNX gets axis 1.
TEST(ModelFile, ConcatJoinsChannels) {
  const auto file = load_text(std::string(kHead) + R"(network {
  name: "net"
  input_shape: [2, 6, 6]
  layer { name: "a" conv2d { out_channels: 4 kernel: [3] padding: [1] } }
  layer { name: "b" conv2d { out_channels: 4 kernel: [1] } input: ["input"] }
  layer { name: "cat" concat {} input: ["a", "b"] }
  layer { name: "flatten" flatten {} }
  layer { name: "f1" linear { out_features: 3 } }
  layer { name: "f2" linear { out_features: 2 } input: ["flatten"] }
  layer { name: "cat2" concat {} input: ["f1", "f2"] }
})");
  auto net = model_file::build_network(file, 0);
  auto& g = dynamic_cast<nn::GraphNet&>(*net);
  NoGradGuard ng;
  const Tensor x = randn({3, 2, 6, 6});
  const Tensor a = g.child("a")(x), b = g.child("b")(x);
  const Tensor y = (*net)(x);
  EXPECT_EQ(y.shape(), (Shape{3, 5}));
  const Tensor flat = g.child("flatten")(cat({a, b}, 1));
  EXPECT_EQ(flat.shape(), (Shape{3, 8 * 36}));
  EXPECT_EQ(y.to_vector<double>(), cat({g.child("f1")(flat), g.child("f2")(flat)}, 1).to_vector<double>());
  EXPECT_EQ(onnx_attribute(onnx::to_onnx(*net, {randn({2, 2, 6, 6})}), "Concat", "axis"), 1);
  const std::string e = error_for(std::string(kHead) +
                                  "network {\n  name: \"n\"\n  input_shape: [4]\n"
                                  "  layer { name: \"a\" relu {} }\n"
                                  "  layer { name: \"c\" concat { dim: 0 } input: [\"input\", \"a\"] }\n}\n");
  EXPECT_TRUE(has(e,
                  "9: network 'n', layer 'c' (concat): dim is 0 (invalid: expected a dimension other than 0, the "
                  "batch"))
      << e;
}

// A field a file leaves out takes the default proto/train_file.proto names (PyTorch's); one it gives
// out of range is refused as invalid, on its line, never read as left out.
TEST(ModelFile, LeftOutTakesTheDefaultInvalidIsRefused) {
  const auto file = load_text(std::string(kHead) + R"(network {
  name: "net"
  input_shape: [64]
  layer { name: "d" dropout {} }
  layer { name: "fc" linear { out_features: 256 } weight_init { normal {} } }
})");
  auto net = model_file::build_network(file, 0);
  auto& seq = dynamic_cast<nn::Sequential&>(*net);
  EXPECT_EQ(dynamic_cast<nn::Dropout&>(seq.child("d")).p, 0.5);                                      // nn.Dropout's
  EXPECT_NEAR(std::sqrt(var(dynamic_cast<nn::Linear&>(seq.child("fc")).weight).item()), 1.0, 0.05);  // normal_'s std
  const std::string net_head = std::string(kHead) + "network {\n  name: \"net\"\n  input_shape: [1, 8, 8]\n";
  auto layer_error = [&](const std::string& layer) { return error_for(net_head + "  " + layer + "\n}\n"); };
  struct Case {
    std::string layer, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"layer { name: \"c\" conv2d { out_channels: -3 kernel: [3] } }",
            "8: network 'net', layer 'c' (conv2d): out_channels is -3 (invalid: expected a positive number)"},
           {"layer { name: \"c\" conv2d { out_channels: 0 kernel: [3] } }", "out_channels is 0 (invalid"},
           {"layer { name: \"c\" conv2d { kernel: [3] } }", "(conv2d): out_channels is missing"},
           {"layer { name: \"c\" conv2d { out_channels: 2 kernel: [3] groups: 0 } }", "groups is 0 (invalid"},
           {"layer { name: \"d\" dropout { p: 1.5 } }",
            "(dropout): p is 1.5 (invalid: expected a probability in [0, 1))"},
           {"layer { name: \"d\" dropout { p: nan } }", "(dropout): p is nan (invalid"},
           {"layer { name: \"u\" unflatten { sizes: [2, 4] } }", "(unflatten): dim is missing"},
           {"layer { name: \"u\" unflatten { dim: 0 sizes: [1, 1] } }", "(unflatten): dim is 0 (invalid"},
           {"layer { name: \"b\" batch_norm { eps: -1 } }",
            "(batch_norm): eps is -1 (invalid: expected a finite number > 0)"},
           {"layer { name: \"n\" layer_norm { last_dims: 0 } }", "(layer_norm): last_dims is 0 (invalid"},
           {"layer { name: \"f\" flatten {} }\n  layer { name: \"l\" linear { out_features: -1 } }",
            "9: network 'net', layer 'l' (linear): out_features is -1 (invalid"},
           {"layer { name: \"l\" leaky_relu { negative_slope: inf } }", "negative_slope is inf (invalid"},
           {"layer { name: \"c\" conv2d { out_channels: 2 kernel: [3] } weight_init { normal { std: -1 } } }",
            "normal { mean: 0 std: -1 } is invalid"},
           {"layer { name: \"c\" conv2d { out_channels: 2 kernel: [3] } bias_init { constant: inf } }",
            "constant inf is invalid (expected a finite number)"},
           {"layer { name: \"f\" flatten {} }\n  layer { name: \"l\" linear { out_features: 3 to_vocabulary: true } }",
            "(linear): out_features and to_vocabulary both give its size (expected one of them)"},
       }) {
    const std::string e = layer_error(c.layer);
    EXPECT_TRUE(has(e, c.expected)) << c.layer << "\n" << e;
    EXPECT_FALSE(has(e, "invalid") && has(e, "missing")) << e;
  }
  // Recurrent and embedding layers, in a network of tokens.
  const std::string tokens = std::string(kHead) + "network {\n  name: \"net\"\n  input_shape: [5]\n" +
                             "  layer { name: \"e\" embedding { num_embeddings: 10 dim: 4 } }\n";
  EXPECT_TRUE(has(error_for(tokens + "  layer { name: \"r\" lstm { hidden: 8 layers: 0 } }\n}\n"),
                  "9: network 'net', layer 'r' (lstm): layers is 0 (invalid"));
  EXPECT_TRUE(
      has(error_for(tokens + "  layer { name: \"r\" gru { hidden: -8 } }\n}\n"), "(gru): hidden is -8 (invalid"));
  EXPECT_TRUE(has(error_for(tokens + "}\n"), "(no error)"));
  EXPECT_TRUE(has(
      error_for(std::string(kHead) +
                "network {\n  name: \"net\"\n  input_shape: [5]\n  layer { name: \"e\" embedding { num_embeddings: 0 "
                "dim: 4 } }\n}\n"),
      "(embedding): num_embeddings is 0 (invalid"));
}

// The data's, the task's and the training's numbers are checked when the file is loaded, each on
// its line, as the flags check theirs: never taken for a value left out, never blamed on a flag.
TEST(ModelFile, SettingsOutOfRangeAreInvalidOnTheirLines) {
  const std::string net = "network { name: \"n\" input_shape: [2] layer { name: \"r\" relu {} } }\n";
  auto file_with = [&](const std::string& data, const std::string& task, const std::string& training) {
    return "version: 1\nname: \"t\"\n" + net + "data {\n  mnist {}\n" + data + "}\n" + task + "training {\n" +
           training + "}\n";
  };
  const std::string adam = "classifier { solver { adam { lr: 0.001 } } }\n";
  struct Case {
    std::string file, expected;
  };
  for (const Case& c : std::vector<Case>{
           {file_with("", adam, "  epochs: 0\n"), "9: training.epochs is 0 (invalid: expected a positive number"},
           {file_with("", adam, "  epochs: -2\n"), "9: training.epochs is -2 (invalid"},
           {file_with("  batch_size: 0\n", adam, ""), "6: data.batch_size is 0 (invalid: expected a positive number"},
           {file_with("  limit: 0\n", adam, ""), "6: data.limit is 0 (invalid"},
           {file_with("", adam, "  max_steps: -5\n"), "9: training.max_steps is -5 (invalid"},
           {file_with("", "classifier {\n  solver { adam { lr: -1 } }\n}\n", ""),
            "8: classifier.solver.adam.lr is -1 (invalid: expected a finite rate > 0)"},
           {file_with("", "classifier {\n  solver { adam { lr: nan } }\n}\n", ""),
            "8: classifier.solver.adam.lr is nan (invalid"},
           {file_with("", "classifier {\n  solver { sgd { lr: 1e400 } }\n}\n", ""),
            "8: classifier.solver.sgd.lr is inf (invalid"},
           {file_with("", "classifier {\n  solver { adam { lr: 0.1 beta1: 1 } }\n}\n", ""),
            "8: classifier.solver.adam.beta1 is 1 (invalid"},
           {file_with("", "classifier { solver {\n  sgd { lr: 0.1 }\n  step_lr { gamma: 0.5 } } }\n", ""),
            "9: classifier.solver.step_lr.step_size is missing"},
           {file_with("", "classifier { solver {\n  sgd { lr: 0.1 }\n  step_lr { step_size: 0 } } }\n", ""),
            "9: classifier.solver.step_lr.step_size is 0 (invalid"},
           {"version: 0\nname: \"t\"\n", "1: version 0 is not a version"},
           // The data loader's, the augmentation's and the loss's ranges (PyTorch's and torchvision's).
           {file_with("  workers: -1\n", adam, ""), "6: data.workers is -1 (invalid: expected 0 (load in the training"},
           {file_with("  workers: 257\n", adam, ""), "6: data.workers is 257 (invalid: expected 0"},
           {file_with("  augment {\n  crop_padding: -1 }\n", adam, ""),
            "7: data.augment.crop_padding is -1 (invalid: expected 0 to 1024 pixels)"},
           {file_with("  augment { crop_padding: 5000 }\n", adam, ""), "6: data.augment.crop_padding is 5000 (invalid"},
           {file_with("  augment { horizontal_flip: 1.5 }\n", adam, ""),
            "6: data.augment.horizontal_flip is 1.5 (invalid: expected a probability in [0, 1])"},
           {file_with("  augment { horizontal_flip: nan }\n", adam, ""), "6: data.augment.horizontal_flip is nan"},
           {file_with("  augment { affine_degrees: -3 }\n", adam, ""),
            "6: data.augment.affine_degrees is -3 (invalid: expected degrees in [0, 180])"},
           {file_with("  augment { affine_degrees: 181 }\n", adam, ""), "6: data.augment.affine_degrees is 181"},
           {file_with("  augment { affine_translate: 2 }\n", adam, ""),
            "6: data.augment.affine_translate is 2 (invalid: expected a fraction of the size in [0, 1])"},
           {file_with("", "classifier {\n  solver { adam { lr: 0.1 } }\n  loss { label_smoothing: 1 }\n}\n", ""),
            "9: classifier.loss.label_smoothing is 1 (invalid: expected a fraction in [0, 1))"},
           {file_with("", "classifier {\n  solver { adam { lr: 0.1 } }\n  loss { label_smoothing: -0.1 }\n}\n", ""),
            "9: classifier.loss.label_smoothing is -0.1 (invalid"},
       }) {
    const std::string e = error_for(c.file);
    EXPECT_TRUE(has(e, c.expected)) << c.file << "\n" << e;
  }
  // The ends of those ranges load.
  EXPECT_EQ(error_for(file_with("  workers: 0\n  augment { crop_padding: 1024 horizontal_flip: 1 affine_degrees: 180 "
                                "affine_translate: 1 }\n",
                                "classifier { solver { adam { lr: 0.1 } } loss { label_smoothing: 0.99 } }\n", "")),
            "(no error)");
  // Left out: the defaults. A StepLR without gamma decays by 0.1, as PyTorch's.
  const auto file = load_text(file_with("", "classifier { solver { sgd { lr: 1 } step_lr { step_size: 1 } } }\n", ""));
  auto layer = nn::make<nn::Linear>(2, 2);
  auto opt = model_file::make_optimizer(file, file.spec.classifier().solver(), "classifier", layer->parameters(), 0);
  auto schedule = model_file::make_schedule(file.spec.classifier().solver(), *opt);
  schedule->step();
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options.at("lr"), 0.1);
  // A rate the file leaves out is missing (unless --lr gives one).
  const auto no_lr = load_text(file_with("", "classifier { solver { adam {} } }\n", ""));
  EXPECT_THROW(
      model_file::make_optimizer(no_lr, no_lr.spec.classifier().solver(), "classifier", layer->parameters(), 0), Error);
  EXPECT_NO_THROW(
      model_file::make_optimizer(no_lr, no_lr.spec.classifier().solver(), "classifier", layer->parameters(), 0.1));
}

// An input_shape too large to make one example is refused naming the network and the shape, not
// by the allocator's message alone.
TEST(ModelFile, AHugeInputShapeNamesTheNetwork) {
  const std::string overflow =
      error_for(std::string(kHead) +
                "network {\n  name: \"n\"\n  input_shape: [4000000000, 4000000000, 4000000000]\n"
                "  layer { name: \"r\" relu {} }\n}\n");
  EXPECT_TRUE(has(overflow, "5: network 'n': input_shape [4000000000, 4000000000, 4000000000] has more values than"))
      << overflow;
  const std::string huge = error_for(std::string(kHead) +
                                     "network {\n  name: \"n\"\n  input_shape: [100000, 100000, "
                                     "10000]\n  layer { name: \"r\" relu {} }\n}\n");
  EXPECT_TRUE(has(huge, "5: network 'n': one example of input_shape [100000, 100000, 10000] cannot be made")) << huge;
}

// A classifier's network must map an example to [1, classes].
TEST(ModelFile, AClassifierScoresClasses) {
  const auto file = load_text(std::string(kHead) + R"(network {
  name: "net"
  input_shape: [1, 4, 4]
  layer { name: "c" conv2d { out_channels: 3 kernel: [1] } }
})");
  auto net = model_file::build_network(file, 0);
  try {
    model_file::classifier_outputs(file, 0, *net);
    ADD_FAILURE() << "a [1, 3, 4, 4] output was taken for logits";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), ":5: network 'net' maps one example to [1, 3, 4, 4] (expected [1, classes]")) << e.what();
  }
  const auto mnist = model_file::load(shipped("mnist_cnn.pbtxt"));
  auto cnn = model_file::build_network(mnist, 0);
  EXPECT_EQ(model_file::classifier_outputs(mnist, 0, *cnn), 10);
  EXPECT_TRUE(cnn->is_training());  // left as it was
}

// training.precision: left out it is empty, which ember train reads as fp32 (docs/PRECISION.md);
// fp32, bf16 and fp16 load; anything else is refused on its line, naming the choices.
TEST(ModelFile, PrecisionDefaultsToFp32AndOnlyKnownOnesLoad) {
  const std::string net =
      "network {\n  name: \"net\"\n  input_shape: [1, 28, 28]\n  layer { name: \"f\" flatten {} }\n"
      "  layer { name: \"fc\" linear { out_features: 10 } }\n}\n";
  EXPECT_EQ(load_text(std::string(kHead) + net).spec.training().precision(), "");
  for (const char* p : {"fp32", "bf16", "fp16"})
    EXPECT_EQ(
        load_text(std::string(kHead) + net + "training { precision: \"" + p + "\" }\n").spec.training().precision(), p);
  const std::string e = error_for(std::string(kHead) + net + "training { precision: \"fp64\" }\n");
  EXPECT_TRUE(has(e, "training.precision is 'fp64' (invalid: expected fp32, bf16 or fp16)")) << e;
}
