// Training throughput of the recurrent text models, Ember beside libtorch in the same run: the
// LSTM language model (vocabulary 10,000, embedding 128, hidden 128, sequence 100, batch 32) and
// the BiLSTM classifier (embedding 32 -> hidden 64 per direction, T = 50, B = 32, 4 classes), one
// full training step each (forward, cross-entropy, backward, Adam), with 1 and 2 threads. The two
// engines' measurements alternate rep by rep so that a noisy neighbour hurts both alike; each
// figure is the median over the reps. Usage: train_text [reps=5] [steps per rep=5]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_util.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "ember_steps.h"
#include "layers/nn.h"
#include "models/lstm.h"
#ifdef EMBER_WITH_LIBTORCH
#include "train_text_torch.h"
#endif

using namespace ember;

namespace {

double seconds(const std::function<void()>& f, int steps) {
  auto a = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

using bench::median;

}  // namespace

int main(int argc, char** argv) {
  return ember::bench::guarded_main(argv[0], [&]() -> int {
    if (bench::help_requested(
            argc, argv,
            "usage: %s [reps=5] [steps=5]\n\nTimes the LSTM language model and BiLSTM classifier training steps beside "
            "libtorch (when built with it).\n"))
      return 0;
    const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
    const bench::LstmLmShape lm;
    const bench::BiLstmShape bi;
    bench::print_cpu_line();
    std::printf("bench/train_text: %d reps of %d training steps each (median), after 2 warm-up steps\n", reps, steps);
#ifdef EMBER_WITH_LIBTORCH
    std::printf(
        "reference: libtorch %s, run in this process, where it runs slower than standalone: "
        "bench/compare_torch.sh gives the honest ratio\n",
        bench::torch_side::version());
#else
    std::printf("reference: none (libtorch was not found at configure time)\n");
#endif
    bench::Table table;
    table.header = {"model", "threads", "ember steps/s", "ember samples/s", "libtorch steps/s", "libtorch samples/s",
                    "ratio"};
    struct Case {
      std::string name;
      int64_t batch;
      std::function<std::function<void()>()> ember, torch;
    };
    std::vector<Case> cases{
        {"LSTM LM (V 10k, E 128, H 128, T 100, B 32)", lm.batch, [&] { return bench::ember_train_step("lstm_lm"); },
#ifdef EMBER_WITH_LIBTORCH
         [&] { return bench::torch_side::make_lstm_lm_step(lm, 1); }
#else
         nullptr
#endif
        },
        {"BiLSTM (E 32 -> H 64 x2, T 50, B 32)", bi.batch, [&] { return bench::ember_train_step("bilstm"); },
#ifdef EMBER_WITH_LIBTORCH
         [&] { return bench::torch_side::make_bilstm_step(bi, 1); }
#else
         nullptr
#endif
        }};
    for (int threads : {1, 2}) {
      for (const auto& c : cases) {
        set_num_threads(threads);
#ifdef EMBER_WITH_LIBTORCH
        bench::torch_side::set_threads(threads);
#endif
        auto e = c.ember();
        std::function<void()> t = c.torch ? c.torch() : nullptr;
        for (int i = 0; i < 2; ++i) {
          e();
          if (t) t();
        }
        std::vector<double> te, tt;
        for (int r = 0; r < reps; ++r) {
          te.push_back(seconds(e, steps));
          if (t) tt.push_back(seconds(t, steps));
        }
        const double es = steps / median(te);
        std::vector<std::string> row{c.name, std::to_string(threads), bench::fmt(es), bench::fmt(es * c.batch, "%.0f")};
        if (t) {
          const double ts = steps / median(tt);
          row.insert(row.end(), {bench::fmt(ts), bench::fmt(ts * c.batch, "%.0f"), bench::fmt(es / ts)});
        } else {
          row.insert(row.end(), {"-", "-", "-"});
        }
        table.rows.push_back(row);
        std::fprintf(stderr, "done: %s, %d thread(s)\n", c.name.c_str(), threads);
      }
    }
    table.print();
    std::printf("ratio = Ember steps/s / libtorch steps/s (> 1: Ember is faster)\n");
    return 0;
  });
}
