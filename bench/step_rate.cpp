// bench/step_rate: Ember's training steps per second on workloads of bench/workloads.h, in a
// process of its own; bench/compare_torch.sh alternates it with bench/torch_ref (libtorch's side)
// and scripts/gpu-check.sh with bench/torch2_ref.py on a GPU (bench/gpu_vs_torch.sh), so that
// neither engine runs inside the other's process. Output: bench/step_rate_main.h.
//   step_rate --workload W[,W...] [--threads N] [--reps N] [--batch N] [--run-seconds S]
//             [--precision fp32|bf16|fp16] [--device cpu|cuda[:N]] [--cuda-graph]
// --precision runs each step inside ember::autocast (docs/PRECISION.md); fp32, the default, none.
// --device cuda builds models and data there and ends each timed run with a synchronize.
// --cuda-graph captures each step in a CUDA graph and replays it (bench/ember_steps.h; refused on
// the CPU and for the GANs, whose steps draw noise).
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/ember_steps.h"
#include "bench/step_rate_main.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/stream.h"

namespace {

struct EngineFlags {
  std::optional<ember::DType> precision;  // nothing: fp32
  ember::Device device = ember::Device::cpu();
  bool cuda_graph = false;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "step_rate: %s\n", what.c_str());
  std::exit(2);
}

// Takes Ember's own flags out of argv (step_rate_main knows only the engine-neutral ones); exits 2
// on a bad value.
EngineFlags take_engine_flags(int& argc, char** argv) {
  EngineFlags f;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cuda-graph") {
      f.cuda_graph = true;
    } else if ((a == "--precision" || a == "--device") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--device") {
        try {
          f.device = ember::Device(v);
        } catch (const ember::Error& e) {
          usage_error("--device: " + std::string(e.what()));
        }
      } else if (v == "bf16") {
        f.precision = ember::DType::BFloat16;
      } else if (v == "fp16") {
        f.precision = ember::DType::Float16;
      } else if (v != "fp32") {
        usage_error("--precision must be fp32, bf16 or fp16, got '" + v + "'");
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  argc = static_cast<int>(rest.size());
  for (int i = 0; i < argc; ++i) argv[i] = rest[static_cast<size_t>(i)];
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const EngineFlags flags = take_engine_flags(argc, argv);
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    auto make = [&](const ember::bench::Workload& w, int threads, int batch) -> std::function<void()> {
      ember::set_num_threads(threads);
      const ember::bench::StepOptions o{.batch = batch, .device = flags.device, .cuda_graph = flags.cuda_graph};
      if (!flags.precision) return ember::bench::ember_train_step(w.name, o);
      // A graph records the autocast forward at capture, so the scope covers the build too.
      std::optional<ember::autocast> building;
      if (flags.cuda_graph) building.emplace(flags.device, *flags.precision);
      std::function<void()> step = ember::bench::ember_train_step(w.name, o);
      if (!step || flags.cuda_graph) return step;
      // The whole step in the scope: backward runs with autocast off and the optimizers cast
      // nothing, so this is the forward under autocast, as a training loop would run it.
      return [step, dev = flags.device, dt = *flags.precision] {
        ember::autocast ac(dev, dt);
        step();
      };
    };
    std::function<void()> sync;
    if (!flags.device.is_cpu()) sync = [dev = flags.device] { ember::get_stream(dev).synchronize(); };
    return ember::bench::step_rate_main("step_rate", argc, argv, make, sync,
                                        " [--precision fp32|bf16|fp16] [--device cpu|cuda[:N]] [--cuda-graph]");
  });
}
