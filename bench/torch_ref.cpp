// bench/torch_ref: libtorch's training steps per second on one workload of bench/workloads.h (the
// same models, batches and optimizers as Ember's side), in a process that links nothing of Ember:
// libtorch measured inside Ember's process ran at about half its standalone speed.
// bench/compare_torch.sh alternates it with bench/step_rate. Output: bench/step_rate_main.h.
//   torch_ref --workload W [--threads N] [--reps N] [--batch N]
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "bench/step_rate_main.h"
#include "bench/train_text_torch.h"
#include "bench/train_torch.h"

int main(int argc, char** argv) {
  // The OpenBLAS kernel family libtorch's GEMMs run (bench/compare_torch.sh sets OPENBLAS_CORETYPE
  // to Ember's), on stderr: looked up at run time, so that nothing links OpenBLAS for it.
  using Corename = char* (*)();
  if (auto f = reinterpret_cast<Corename>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
    std::fprintf(stderr, "# torch_ref: OpenBLAS %s\n", f());
  return ember::bench::step_rate_main(
      "torch_ref", argc, argv, [](const ember::bench::Workload& w, int threads, int batch) -> std::function<void()> {
        namespace side = ember::bench::torch_side;
        const std::string name = w.name;
        side::set_threads(threads);
        auto with = [batch](auto shape) {
          shape.batch = batch;
          return shape;
        };
        if (name == "lstm_lm") return side::make_lstm_lm_step(with(ember::bench::LstmLmShape{}), 1);
        if (name == "lstm_classifier")
          return side::make_lstm_classifier_step(with(ember::bench::LstmClassifierShape{}), 1);
        if (name == "bilstm") return side::make_bilstm_step(with(ember::bench::BiLstmShape{}), 1);
        return ember::bench::torch_train_step(name, batch, threads);
      });
}
