// Fine-tuning: --init-from CHECKPOINT starts a new run from a checkpoint's weights, as a PyTorch
// user calls model.load_state_dict(torch.load(...)) before training on a new task: parameters and
// buffers only, no optimizer state, step or data order (--resume stays the exact continuation of a
// run). --init-skip PREFIX[,PREFIX...] leaves the layers under those names (a classifier head sized
// for other classes) to their fresh initialisation. Every mismatch (a tensor the model has and the
// checkpoint lacks, one the checkpoint has and the model lacks, a shape or dtype that differs) is
// listed in one ember::Error that names the checkpoint, before any weight changes.
//
// The Trainer applies it when a run starts fresh; with --resume auto a run that already has a
// checkpoint resumes from it instead (a preempted fine-tuning job goes on where it stopped).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "layers/module.h"
#include "train/flags.h"

namespace ember::train {

struct InitFrom {
  std::string path;               // empty: start from the fresh initialisation
  std::vector<std::string> skip;  // name prefixes left to it

  InitFrom() = default;
  // --init-from and --init-skip, which every training program takes.
  explicit InitFrom(Flags& f);
  // What the flags alone can tell (exit status 2). `resume` is --resume: a checkpoint named there
  // continues a run, which --init-from cannot also start.
  void check(Flags& f, const std::string& resume) const;
};

// Whether tensor `name` lies under `prefix`: the name itself, or a name below it ("f2" holds
// "f2.weight", not "f20.weight"; "block." holds everything starting so).
bool under_prefix(const std::string& name, const std::string& prefix);

// `meta` with where a fine-tuned run's weights came from ("init_from", "init_skip"), so that its
// checkpoints say so.
std::map<std::string, std::string> with_init_record(std::map<std::string, std::string> meta, const InitFrom& init);

// Loads init.path's weights into `model` (on any device), leaving the tensors under init.skip as
// they are. Returns the line that says what was loaded.
std::string init_from_checkpoint(nn::Module& model, const InitFrom& init);

}  // namespace ember::train
