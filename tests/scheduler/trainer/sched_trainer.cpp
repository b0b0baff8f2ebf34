// A small training job for the scheduler daemon's tests: a deterministic MLP regression (layers/,
// SGD with momentum) that checkpoints every --checkpoint-every steps, and on SIGTERM writes a
// checkpoint and exits with status 75 ("preempted"), as Ember's training programs do. With
// --resume auto it continues from checkpoint-dir/last.ckpt bit for bit, so a run that was
// preempted and resumed ends with exactly the parameters of one that was not. At the end it
// writes every parameter (hex floats) to --out.
//
// --gate FILE --gate-step K makes it wait at step K until FILE exists (checking for SIGTERM
// meanwhile): a test holds the job mid-run without relying on timing.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops.h"
#include "layers/checkpoint.h"
#include "layers/nn.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
constexpr int kPreempted = 75;

struct Args {
  long steps = 20, every = 4, gate_step = -1, seed = 7;
  std::string ckpt, out, gate, resume;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    EMBER_CHECK(i + 1 < argc, "sched_trainer: ", k, " needs a value");
    std::string v = argv[++i];
    if (k == "--steps")
      a.steps = std::stol(v);
    else if (k == "--checkpoint-every")
      a.every = std::stol(v);
    else if (k == "--gate-step")
      a.gate_step = std::stol(v);
    else if (k == "--seed")
      a.seed = std::stol(v);
    else if (k == "--checkpoint-dir")
      a.ckpt = v;
    else if (k == "--out")
      a.out = v;
    else if (k == "--gate")
      a.gate = v;
    else if (k == "--resume")
      a.resume = v;
    else
      EMBER_FAIL("sched_trainer: unknown flag ", k);
  }
  EMBER_CHECK(a.steps > 0 && a.every > 0, "sched_trainer: --steps and --checkpoint-every must be positive");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    std::signal(SIGTERM, [](int) { g_stop = true; });
    manual_seed(static_cast<uint64_t>(a.seed));
    nn::Sequential net(std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::Tanh>(),
                       std::make_shared<nn::Linear>(16, 1));
    // Data: 64 fixed examples of a smooth target; batch b uses rows [16 (b mod 4), +16).
    Tensor x = randn({64, 8});
    Tensor y = tanh(sum(x, {1}, true));
    optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9});
    TrainingState state{&net, {&opt}, {{"default", &default_generator()}}};
    TrainingPosition pos;
    const std::string last = a.ckpt.empty() ? "" : (fs::path(a.ckpt) / "last.ckpt").string();
    if (a.resume == "auto" && !last.empty() && fs::exists(last)) {
      pos = load_training(last, state).first;
      std::printf("resumed from step %lld\n", static_cast<long long>(pos.step));
    }
    if (!a.ckpt.empty()) fs::create_directories(a.ckpt);
    auto checkpoint = [&] {
      if (!last.empty()) save_training(last, state, pos);
    };
    while (pos.step < a.steps) {
      if (pos.step == a.gate_step && !a.gate.empty()) {
        std::printf("waiting for gate at step %lld\n", static_cast<long long>(pos.step));
        std::fflush(stdout);
        // Gives up when the gate's folder is gone (the test ended) or after about two minutes.
        for (int i = 0; !fs::exists(a.gate) && !g_stop; ++i) {
          EMBER_CHECK(i < 12000 && fs::exists(fs::path(a.gate).parent_path()), "sched_trainer: gave up waiting for ",
                      a.gate);
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      if (g_stop) {
        checkpoint();
        std::printf("preempted at step %lld\n", static_cast<long long>(pos.step));
        return kPreempted;
      }
      int64_t b = pos.step % 4;
      Tensor loss = nn::mse_loss(net.forward(x.narrow(0, 16 * b, 16)), y.narrow(0, 16 * b, 16));
      opt.zero_grad();
      loss.backward();
      opt.step();
      ++pos.step;
      std::printf("step %lld loss %.6f\n", static_cast<long long>(pos.step), loss.item());
      std::fflush(stdout);
      if (pos.step % a.every == 0) checkpoint();
    }
    if (!a.out.empty()) {
      write_file_atomic(a.out, [&](std::FILE* f) {
        for (const auto& [name, t] : net.named_parameters()) {
          std::fprintf(f, "%s", name.c_str());
          for (float v : t.contiguous().to_vector<float>()) std::fprintf(f, " %a", static_cast<double>(v));
          std::fprintf(f, "\n");
        }
      });
    }
    std::printf("done at step %lld\n", static_cast<long long>(pos.step));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sched_trainer: %s\n", e.what());
    return 1;
  }
}
