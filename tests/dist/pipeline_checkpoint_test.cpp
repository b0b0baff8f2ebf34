// Pipeline checkpoints: a job of K stages (and replicas) writes the one-process format; it resumes
// on the same layout with every rank's generator, on another stage count with --reshard, and in
// one process through load_training; the continued training equals an uninterrupted one.
#include "dist/pipeline_checkpoint.h"

#include <filesystem>
#include <map>

#include "dist/pipeline_grid.h"
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

std::shared_ptr<nn::Sequential> mlp() {
  manual_seed(21);
  auto m =
      std::make_shared<nn::Sequential>(nn::make<nn::Linear>(6, 10), nn::make<nn::Tanh>(), nn::make<nn::Linear>(10, 10),
                                       nn::make<nn::ReLU>(), nn::make<nn::Linear>(10, 4));
  m->to(DType::Float64);
  return m;
}

std::vector<int> even(int layers, int k) {
  std::vector<int> b;
  for (int s = 0; s < k; ++s) b.push_back(s * layers / k);
  return b;
}

struct Batch {
  Tensor x, y;
};
Batch batch(int step) {
  Generator g(300 + static_cast<uint64_t>(step));
  return {randn({12, 6}, {.dtype = DType::Float64}, &g), randint(0, 4, {12}, {.dtype = DType::Int64}, &g)};
}

Tensor loss_fn(const Tensor& out, const Tensor& y) {
  return cross_entropy(out, y);
}

// Steps [from, to) of Adam (state that a resume must carry) on a pipeline of `stages` stages.
void train(Pipeline& pipe, optim::Optimizer& opt, int from, int to, int replicas = 1, int replica = 0) {
  for (int s = from; s < to; ++s) {
    Batch b = batch(s);
    const int64_t rows = 12 / replicas;
    opt.zero_grad();
    pipe.train_step(b.x.narrow(0, replica * rows, rows), b.y.narrow(0, replica * rows, rows), loss_fn);
    opt.step();
  }
}

// The whole model after 4 steps in one process, the yardstick.
std::map<std::string, std::vector<double>> uninterrupted() {
  auto m = mlp();
  optim::Adam opt(m->parameters(), {.lr = 0.05});
  for (int s = 0; s < 4; ++s) {
    Batch b = batch(s);
    opt.zero_grad();
    loss_fn(m->forward(b.x), b.y).backward();
    opt.step();
  }
  std::map<std::string, std::vector<double>> out;
  for (auto& [n, t] : m->state_dict()) out[n] = t.to_vector<double>();
  return out;
}

double diff(nn::Module& m, const std::map<std::string, std::vector<double>>& want) {
  double worst = 0;
  for (auto& [n, t] : m.state_dict()) {
    auto v = t.to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::abs(v[i] - want.at(n)[i]));
  }
  return worst;
}

}  // namespace

TEST(PipelineCheckpoint, ResumesOnTheSameLayoutAnotherStageCountAndInOneProcess) {
  const std::string dir = fresh_dir("pipeline_ckpt");
  const int n = comm().size();
  const auto want = uninterrupted();
  {  // 2 steps on n stages, then a checkpoint
    auto m = mlp();
    Pipeline pipe(*m, even(5, n), comm(), {.micro_batches = 3});
    optim::Adam opt(pipe.parameters(), {.lr = 0.05});
    train(pipe, opt, 0, 2);
    Generator gen(40 + static_cast<uint64_t>(comm().rank()));
    save_pipeline(dir, pipe, {nullptr, {&opt}, {{"aug", &gen}}}, {.step = 2}, {{"model", "mlp"}});
  }
  EXPECT_TRUE(std::filesystem::exists(main_checkpoint_path(dir)));
  EXPECT_TRUE(std::filesystem::exists(stage_checkpoint_path(dir, 0)));
  {  // the same layout: every rank gets its own generator back; 2 more steps end where one process does
    auto m = mlp();
    Pipeline pipe(*m, even(5, n), comm(), {.micro_batches = 3});
    optim::Adam opt(pipe.parameters(), {.lr = 0.05});
    Generator gen(1);
    DistributedResume r = load_pipeline(dir, pipe, {nullptr, {&opt}, {{"aug", &gen}}});
    EXPECT_FALSE(r.resharded);
    EXPECT_EQ(r.position.step, 2);
    EXPECT_EQ(r.metadata["model"], "mlp");
    EXPECT_EQ(gen.state().seed, 40 + static_cast<uint64_t>(comm().rank()));
    train(pipe, opt, 2, 4);
    // Each stage's own layers match the uninterrupted run (the other layers are not trained here).
    double worst = 0;
    for (auto& [name, t] : pipe.stage_module().state_dict()) {
      auto v = t.to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::abs(v[i] - want.at(name)[i]));
    }
    EXPECT_LT(worst, 1e-10) << pipe.describe();
  }
  {  // one stage per rank (another stage count): refused unless resharding, then the same result
    auto m = mlp();
    Pipeline pipe(*m, {0}, comm(), {.micro_batches = 2, .stage_ranks = {comm().rank()}});
    optim::Adam opt(pipe.parameters(), {.lr = 0.05});
    Generator gen(1);
    TrainingState st{nullptr, {&opt}, {{"aug", &gen}}};
    if (n > 1) {
      EXPECT_TRUE(has(error_of([&] { load_pipeline(dir, pipe, st); }), "allow resharding (--reshard)"));
    }
    DistributedResume r = load_pipeline(dir, pipe, st, true);
    EXPECT_EQ(r.resharded, n > 1);
    EXPECT_EQ(gen.state().seed, 40u);  // rank 0's (on one rank, its own: the same)
    train(pipe, opt, 2, 4);
    EXPECT_LT(diff(*m, want), 1e-10);
  }
  {  // one process, through the one-process API
    auto m = mlp();
    optim::Adam opt(m->parameters(), {.lr = 0.05});
    Generator gen(1);
    auto [pos, meta] = load_training(main_checkpoint_path(dir), {m.get(), {&opt}, {{"aug", &gen}}});
    EXPECT_EQ(pos.step, 2);
    for (int s = 2; s < 4; ++s) {
      Batch b = batch(s);
      opt.zero_grad();
      loss_fn(m->forward(b.x), b.y).backward();
      opt.step();
    }
    EXPECT_LT(diff(*m, want), 1e-10);
  }
  comm().barrier()->wait();
}

// With replicas, the first replica's stages write the stage files; any replica resumes.
TEST(PipelineCheckpoint, StagesTimesReplicasRoundTrip) {
  const int n = comm().size();
  if (n % 2) GTEST_SKIP() << "needs an even number of ranks";
  const std::string dir = fresh_dir("pipeline_ckpt_grid");
  const auto want = uninterrupted();
  PipelineGrid grid = make_pipeline_grid(comm(), n / 2);  // 2 replicas
  auto run = [&](int from, int to, bool load) {
    auto m = mlp();
    Pipeline pipe(*m, even(5, grid.stages), comm(),
                  {.micro_batches = 2, .stage_ranks = grid.stage_ranks, .data_parallel = grid.replicas_comm.get()});
    optim::Adam opt(pipe.parameters(), {.lr = 0.05});
    TrainingState st{nullptr, {&opt}, {}};
    if (load) load_pipeline(dir, pipe, st);
    train(pipe, opt, from, to, grid.replicas, grid.replica);
    if (!load) save_pipeline(dir, pipe, st, {.step = to});
    double worst = 0;
    for (auto& [name, t] : pipe.stage_module().state_dict()) {
      auto v = t.to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::abs(v[i] - want.at(name)[i]));
    }
    return worst;
  };
  run(0, 2, false);
  EXPECT_LT(run(2, 4, true), 1e-10) << grid.describe();
}

TEST(PipelineCheckpoint, WrongOptimizersAreRefused) {
  auto m = mlp();
  Pipeline pipe(*m, {0}, comm(), {.stage_ranks = {comm().rank()}});
  optim::SGD part(pipe.parameters(), {.lr = 0.1});
  EXPECT_TRUE(has(error_of([&] { save_pipeline("unused", pipe, {nullptr, {}, {}}, {}); }), "expected one optimizer"));
  auto other = mlp();
  EXPECT_TRUE(has(error_of([&] {
                    save_pipeline("unused", pipe, {other.get(), {&part}, {}}, {});
                  }),
                  "must be the pipeline's whole model"));
  EXPECT_TRUE(has(error_of([&] { load_pipeline("no_such_dir", pipe, {nullptr, {&part}, {}}); }), "no checkpoint at"));
}
