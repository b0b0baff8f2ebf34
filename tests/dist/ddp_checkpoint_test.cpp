// Distributed checkpoints: rank 0 writes the model and optimizer, every rank its generators and
// loader position; resuming restores them and refuses another world size unless resharding.
#include "dist/ddp_checkpoint.h"

#include <filesystem>

#include "dist_test_util.h"
#include "layers/nn.h"

using namespace ember;
using namespace ember::dist;
using dist_test::comm;
using test_util::error_of;
using test_util::has;

namespace {
std::string fresh_dir(const std::string& name) {
  std::string dir = name + "_np" + std::to_string(comm().size());
  if (comm().rank() == 0) std::filesystem::remove_all(dir);
  comm().barrier()->wait();
  return dir;
}
}  // namespace

TEST(DdpCheckpoint, RoundTripKeepsEveryRanksGeneratorAndPosition) {
  std::string dir = fresh_dir("dist_ckpt");
  manual_seed(1);
  nn::Linear lin(3, 2);
  optim::Adam opt(lin.parameters(), {.lr = 0.1});
  lin(ones({1, 3})).sum().backward();
  opt.step();
  Generator gen(1000 + static_cast<uint64_t>(comm().rank()));
  randn({5}, {}, &gen);  // advance it: a rank-specific state
  TrainingState state{&lin, {&opt}, {{"aug", &gen}}};
  TrainingPosition pos;
  pos.step = 7;
  pos.loader_epoch = 1;
  pos.loader_batch = 3;
  save_distributed(dir, comm(), state, pos, {{"model", "Linear"}});
  EXPECT_TRUE(std::filesystem::exists(main_checkpoint_path(dir)));
  EXPECT_TRUE(std::filesystem::exists(rank_checkpoint_path(dir, comm().rank())));
  GeneratorState saved = gen.state();
  auto weights = lin.weight.to_vector<double>();

  // Disturb everything, then resume.
  randn({9}, {}, &gen);
  lin.weight.detach().fill_(0.0);
  DistributedResume r = load_distributed(dir, comm(), state);
  EXPECT_FALSE(r.resharded);
  EXPECT_EQ(r.position.step, 7);
  EXPECT_EQ(r.position.loader_epoch, 1);
  EXPECT_EQ(r.position.loader_batch, 3);
  EXPECT_EQ(r.position.world_size, comm().size());
  EXPECT_EQ(r.metadata["model"], "Linear");
  EXPECT_EQ(gen.state().seed, saved.seed);
  EXPECT_EQ(gen.state().offset, saved.offset);
  EXPECT_EQ(lin.weight.to_vector<double>(), weights);
}

TEST(DdpCheckpoint, AnotherWorldSizeIsRefusedUnlessResharding) {
  std::string dir = fresh_dir("dist_ckpt_ws");
  nn::Linear lin(2, 2);
  Generator gen(5);
  TrainingState state{&lin, {}, {{"aug", &gen}}};
  if (comm().rank() == 0) {
    std::filesystem::create_directories(dir);
    TrainingPosition p;
    p.world_size = comm().size() + 1;
    p.loader_batch = 4;
    save_training(main_checkpoint_path(dir), state, p);
  }
  comm().barrier()->wait();
  std::string msg = error_of([&] { load_distributed(dir, comm(), state); });
  EXPECT_TRUE(has(msg, "was written by a job of " + std::to_string(comm().size() + 1) + " ranks")) << msg;
  EXPECT_TRUE(has(msg, "--reshard")) << msg;
  DistributedResume r = load_distributed(dir, comm(), state, true);
  EXPECT_TRUE(r.resharded);
  EXPECT_EQ(r.position.loader_batch, 4);
  EXPECT_TRUE(has(error_of([&] { load_distributed(dir + "_missing", comm(), state); }), "no checkpoint at"));
}
