// How `ember` finds its subcommands: each level (`ember`, `ember sched`) is a table of named
// commands, so a new one (train, launch, sched serve/submit ...) is one more table entry and one
// function. A leaf command returns the process exit status: 0 success, 1 a failure (ember::Error:
// bad file, impossible job), 2 a usage mistake (UsageError: the message and the usage on stderr).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tools/run_leaf.h"

namespace ember::tools {

struct Command {
  std::string name;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;  // args after the command's name
};

// Runs the command named by args[0] with the rest; `prog` is the path so far ("ember sched").
int dispatch(const std::string& prog, const std::vector<Command>& table, const std::vector<std::string>& args);

// The tables.
std::vector<Command> top_level_commands();
std::vector<Command> sched_commands();
std::vector<Command> export_commands();  // tools/export_onnx.cpp

int sched_simulate(const std::vector<std::string>& args);
int sched_bench(const std::vector<std::string>& args);
int sched_make_trace(const std::vector<std::string>& args);
int sched_train_policy(const std::vector<std::string>& args);
int sched_serve(const std::vector<std::string>& args);
int sched_submit(const std::vector<std::string>& args);
int sched_status(const std::vector<std::string>& args);
int sched_queue(const std::vector<std::string>& args);
int sched_cancel(const std::vector<std::string>& args);
int sched_preempt(const std::vector<std::string>& args);
int sched_logs(const std::vector<std::string>& args);
int sched_drain(const std::vector<std::string>& args);
int launch(const std::vector<std::string>& args);   // tools/launch.cpp
int info(const std::vector<std::string>& args);     // tools/info.cpp
int train(const std::vector<std::string>& args);    // tools/train.cpp
int eval(const std::vector<std::string>& args);     // tools/eval.cpp
int predict(const std::vector<std::string>& args);  // tools/predict.cpp

}  // namespace ember::tools
