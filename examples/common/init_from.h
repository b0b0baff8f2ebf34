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

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/flags.h"
#include "layers/checkpoint.h"

namespace ember::examples {

struct InitFrom {
  std::string path;               // empty: start from the fresh initialisation
  std::vector<std::string> skip;  // name prefixes left to it

  InitFrom() = default;
  // --init-from and --init-skip, which every training program takes.
  explicit InitFrom(Flags& f) {
    path = f.str("init-from", "",
                 "start a new run from this checkpoint's weights (fine-tuning: no optimizer state or step)");
    const std::string s =
        f.str("init-skip", "", "with --init-from: comma-separated layer names (prefixes) left freshly initialised");
    for (size_t at = 0; !s.empty() && at <= s.size();) {
      const size_t comma = std::min(s.find(',', at), s.size());
      if (comma > at) skip.push_back(s.substr(at, comma - at));
      at = comma + 1;
    }
  }
  // What the flags alone can tell (exit status 2). `resume` is --resume: a checkpoint named there
  // continues a run, which --init-from cannot also start.
  void check(Flags& f, const std::string& resume) const {
    if (!skip.empty() && path.empty()) f.fail("--init-skip goes with --init-from");
    if (!path.empty() && !resume.empty() && resume != "auto")
      f.fail("--init-from starts a new run and --resume " + resume +
             " continues one: give one of them (--resume auto goes with --init-from: it resumes once the run has "
             "a checkpoint)");
  }
};

// Whether tensor `name` lies under `prefix`: the name itself, or a name below it ("f2" holds
// "f2.weight", not "f20.weight"; "block." holds everything starting so).
inline bool under_prefix(const std::string& name, const std::string& prefix) {
  if (prefix.empty() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return name.size() == prefix.size() || prefix.back() == '.' || name[prefix.size()] == '.';
}

namespace init_from_detail {

inline std::string describe(const Tensor& t) {
  return shape_str(t.shape()) + (t.dtype() == DType::Float32 ? "" : std::string(" ") + dtype_name(t.dtype()));
}

// The tensors of `model` to load from `saved`, and every problem (missing, unexpected, shape or
// dtype) with the names left out; `used` gets the prefixes that matched something.
inline nn::StateDict match(const nn::StateDict& model, const std::map<std::string, Tensor>& saved,
                           const std::vector<std::string>& skip, std::vector<std::string>& problems,
                           std::vector<std::string>& skipped) {
  std::set<std::string> used, names;
  auto skipped_by = [&](const std::string& n) {
    bool hit = false;
    for (const std::string& p : skip)
      if (under_prefix(n, p)) used.insert(p), hit = true;
    return hit;
  };
  nn::StateDict load;
  for (const auto& [n, t] : model) {
    names.insert(n);
    auto it = saved.find(n);
    if (skipped_by(n)) {
      skipped.push_back(n);
    } else if (it == saved.end()) {
      problems.push_back("missing: the model's '" + n + "' " + describe(t) + " is not in the checkpoint");
    } else if (it->second.shape() != t.shape() || it->second.dtype() != t.dtype()) {
      problems.push_back("'" + n + "': the model has " + describe(t) + ", the checkpoint " + describe(it->second));
    } else {
      load.emplace_back(n, it->second);
    }
  }
  for (const auto& [n, t] : saved)
    if (!skipped_by(n) && !names.count(n))
      problems.push_back("unexpected: the checkpoint's '" + n + "' " + describe(t) + " is not in the model");
  for (const std::string& p : skip)
    if (!used.count(p)) problems.push_back("--init-skip " + p + " names no tensor of the model or the checkpoint");
  return load;
}

}  // namespace init_from_detail

// `meta` with where a fine-tuned run's weights came from ("init_from", "init_skip"), so that its
// checkpoints say so.
inline std::map<std::string, std::string> with_init_record(std::map<std::string, std::string> meta,
                                                           const InitFrom& init) {
  if (init.path.empty()) return meta;
  meta["init_from"] = init.path;
  std::string skip;
  for (const std::string& p : init.skip) skip += (skip.empty() ? "" : ",") + p;
  if (!skip.empty()) meta["init_skip"] = skip;
  return meta;
}

// Loads init.path's weights into `model` (on any device), leaving the tensors under init.skip as
// they are. Returns the line that says what was loaded.
inline std::string init_from_checkpoint(nn::Module& model, const InitFrom& init) {
  CheckpointContents c;
  try {
    c = read_checkpoint(init.path);
  } catch (const Error& e) {
    EMBER_FAIL("--init-from ", init.path, ": ", e.what());
  }
  std::map<std::string, Tensor> saved;
  for (const nn::StateDict* d : {&c.model_parameters, &c.model_buffers}) saved.insert(d->begin(), d->end());
  EMBER_CHECK(!saved.empty(), "--init-from ", init.path, ": the checkpoint holds no model weights");
  std::vector<std::string> problems, skipped;
  const nn::StateDict load = init_from_detail::match(model.state_dict(), saved, init.skip, problems, skipped);
  if (!problems.empty()) {
    std::string list;
    for (const std::string& p : problems) list += "\n  " + p;
    EMBER_FAIL("--init-from ", init.path, ": its weights do not fit ", model.type_name(), " (", problems.size(),
               " problem", problems.size() == 1 ? "" : "s", "):", list,
               "\n(--init-skip PREFIX leaves layers such as a classifier head sized for other classes to their fresh "
               "initialisation)");
  }
  model.load_state_dict(load, /*strict=*/false);
  std::string line = "Initialised " + std::to_string(load.size()) + " tensors from " + init.path;
  if (!skipped.empty()) {
    line += "; left freshly initialised:";
    for (const std::string& n : skipped) line += " " + n;
  }
  return line + " (fine-tuning: new optimizer state, step 0).";
}

}  // namespace ember::examples
