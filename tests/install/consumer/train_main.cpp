// Builds against an installed Ember's training library (Ember::ember_train, headers as
// <ember/train/...>) the way a training program does: the common flags, then a metrics log
// written and read back.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "train/flags.h"
#include "train/progress.h"
#include "train/training.h"

int main(int argc, char** argv) {
  using namespace ember;
  train::Flags flags(argc, argv, "A program built against an installed ember_train.");
  train::CommonFlags cf(flags, /*epochs=*/1, /*batch=*/16, /*lr=*/0.5, "consumer", {.checkpoint_dir = ""});
  flags.finish();
  cf.check(flags);
  std::cout << "epochs=" << cf.epochs << " lr=" << train::exact_number(cf.lr) << "\n";
  {
    train::MetricsLog log("consumer_metrics.csv", {"epoch", "step", "loss"}, {train::MetricsLog::Existing::kRestart});
    log.row({{"epoch", 1.0}, {"step", double(cf.epochs) * 2}, {"loss", 0.25}});
  }
  std::ifstream in("consumer_metrics.csv");
  std::stringstream text;
  text << in.rdbuf();
  std::cout << text.str();
  return 0;
}
