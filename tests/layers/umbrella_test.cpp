// <ember/ember.h> alone gives a user the whole training API: this file includes nothing else of
// Ember, builds a small model from layers, a loss, an optimizer, a schedule and a checkpoint.
#include <ember/ember.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

using namespace ember;

TEST(UmbrellaHeader, GivesTheWholeTrainingApi) {
  manual_seed(3);
  nn::Sequential net(nn::make<nn::Conv2d>(1, 2, 3, nn::Conv2dOptions{.padding = "same"}), nn::make<nn::ReLU>(),
                     nn::make<nn::MaxPool2d>(2), nn::make<nn::Flatten>(), nn::make<nn::Linear>(8, 3));
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::StepLR sched(opt, 1, 0.5);
  Tensor x = randn({4, 1, 4, 4});
  Tensor y = tensor({0, 1, 2, 1}, {.dtype = DType::Int64});
  Tensor loss = nn::cross_entropy(net(x), y);
  opt.zero_grad();
  loss.backward();
  nn::utils::clip_grad_norm_(net.parameters(), 1.0);
  opt.step();
  sched.step();
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options.at("lr"), 0.05);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ember_umbrella_" + std::to_string(::getpid()))).string();
  save(net, path);
  nn::Sequential copy(nn::make<nn::Conv2d>(1, 2, 3, nn::Conv2dOptions{.padding = "same"}), nn::make<nn::ReLU>(),
                      nn::make<nn::MaxPool2d>(2), nn::make<nn::Flatten>(), nn::make<nn::Linear>(8, 3));
  load(copy, path);
  std::filesystem::remove(path);
  EXPECT_TRUE(equal(copy(x), net(x)));
}
