// bench/step_rate: Ember's training steps per second on one workload of bench/workloads.h, in a
// process of its own; bench/compare_torch.sh alternates it with bench/torch_ref (libtorch's side)
// so that neither engine runs inside the other's process. Output: bench/step_rate_main.h.
//   step_rate --workload W [--threads N] [--reps N] [--batch N] [--precision fp32|bf16|fp16]
// --precision runs each step inside ember::autocast (docs/PRECISION.md); fp32, the default, none.
#include <cstring>
#include <optional>
#include <vector>

#include "bench/bench_util.h"
#include "bench/ember_steps.h"
#include "bench/step_rate_main.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace {

// Takes "--precision P" out of argv (step_rate_main knows only the engine-neutral flags); returns
// the autocast dtype, nothing for fp32, or exits 2 on anything else.
std::optional<ember::DType> take_precision(int& argc, char** argv) {
  std::optional<ember::DType> dt;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--precision") != 0 || i + 1 >= argc) {
      rest.push_back(argv[i]);
      continue;
    }
    const std::string p = argv[++i];
    if (p == "bf16") {
      dt = ember::DType::BFloat16;
    } else if (p == "fp16") {
      dt = ember::DType::Float16;
    } else if (p != "fp32") {
      std::fprintf(stderr, "step_rate: --precision must be fp32, bf16 or fp16, got '%s'\n", p.c_str());
      std::exit(2);
    }
  }
  argc = static_cast<int>(rest.size());
  for (int i = 0; i < argc; ++i) argv[i] = rest[static_cast<size_t>(i)];
  return dt;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<ember::DType> precision = take_precision(argc, argv);
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    return ember::bench::step_rate_main(
        "step_rate", argc, argv, [&](const ember::bench::Workload& w, int threads, int batch) -> std::function<void()> {
          ember::set_num_threads(threads);
          std::function<void()> step = ember::bench::ember_train_step(w.name, batch);
          if (!precision || !step) return step;
          // The whole step in the scope: backward runs with autocast off and the optimizers cast
          // nothing, so this is the forward under autocast, as a training loop would run it.
          return [step, dt = *precision] {
            ember::autocast ac(ember::Device::cpu(), dt);
            step();
          };
        });
  });
}
