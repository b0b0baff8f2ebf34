#include "tools/command.h"

#include <iostream>

namespace ember::tools {
namespace {

std::string table_usage(const std::string& prog, const std::vector<Command>& table) {
  std::string u = "usage: " + prog + " <command> [flags]\n\ncommands:\n";
  for (const Command& c : table)
    u += "  " + c.name + std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') + c.summary + "\n";
  u += "\nRun '" + prog + " <command> --help' for a command's flags.\n";
  return u;
}

}  // namespace

int dispatch(const std::string& prog, const std::vector<Command>& table, const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << prog << ": expected a command\n" << table_usage(prog, table);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << table_usage(prog, table);
    return 0;
  }
  for (const Command& c : table)
    if (c.name == args[0]) return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << prog << ": unknown command '" << args[0] << "'\n" << table_usage(prog, table);
  return 2;
}

std::vector<Command> top_level_commands() {
  return {
      {"sched", "multi-job device scheduler: the daemon, its clients, trace simulation",
       [](const std::vector<std::string>& a) { return dispatch("ember sched", sched_commands(), a); }},
      {"train", "train the classifier, GAN or language model a model file (.pbtxt) describes", train},
      {"eval", "a checkpoint's test loss and accuracy (a language model's perplexity), as training reported them",
       eval},
      {"predict", "a classifier checkpoint's class probabilities for images or CSV rows", predict},
      {"export", "write a trained model in another format (onnx)",
       [](const std::vector<std::string>& a) { return dispatch("ember export", export_commands(), a); }},
      {"launch", "start N ranks of a program through mpirun (data-parallel training)", launch},
      {"info", "this build and this machine: backends, CPU capability levels, threads, devices", info},
  };
}

std::vector<Command> sched_commands() {
  return {
      {"simulate", "run scheduling policies on a job trace and report JCT, makespan, utilisation", sched_simulate},
      {"bench", "time one scheduling decision over a large synthetic queue, per policy", sched_bench},
      {"make-trace", "write a larger trace: one repeated back to back, or a synthetic one drawn from it",
       sched_make_trace},
      {"train-policy", "train the learned policy by policy gradient in the simulator", sched_train_policy},
      {"serve", "run the daemon that shares this machine's devices between jobs", sched_serve},
      {"submit", "submit a job (spec file or command line) to the daemon", sched_submit},
      {"status", "the daemon's devices and jobs, or one job in detail", sched_status},
      {"queue", "running and queued jobs", sched_queue},
      {"cancel", "cancel a queued or running job", sched_cancel},
      {"preempt", "stop a running job through its checkpoint and put it back in the queue", sched_preempt},
      {"logs", "a job's output (--follow to keep reading)", sched_logs},
      {"drain", "stop taking jobs and exit once nothing runs (--preempt: checkpoint them now)", sched_drain},
  };
}

}  // namespace ember::tools
