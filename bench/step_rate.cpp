// bench/step_rate: Ember's training steps per second on one workload of bench/workloads.h, in a
// process of its own; bench/compare_torch.sh alternates it with bench/torch_ref (libtorch's side)
// so that neither engine runs inside the other's process. Output: bench/step_rate_main.h.
//   step_rate --workload W [--threads N] [--reps N] [--batch N]
#include "bench/bench_util.h"
#include "bench/ember_steps.h"
#include "bench/step_rate_main.h"
#include "core/parallel.h"

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    return ember::bench::step_rate_main("step_rate", argc, argv,
                                        [](const ember::bench::Workload& w, int threads, int batch) {
                                          ember::set_num_threads(threads);
                                          return ember::bench::ember_train_step(w.name, batch);
                                        });
  });
}
