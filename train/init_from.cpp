#include "train/init_from.h"

#include <algorithm>
#include <set>

#include "layers/checkpoint.h"

namespace ember::train {
namespace {

std::string describe(const Tensor& t) {
  return shape_str(t.shape()) + (t.dtype() == DType::Float32 ? "" : std::string(" ") + dtype_name(t.dtype()));
}

// The tensors of `model` to load from `saved`, and every problem (missing, unexpected, shape or
// dtype) with the names left out; `used` gets the prefixes that matched something.
nn::StateDict match(const nn::StateDict& model, const std::map<std::string, Tensor>& saved,
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

}  // namespace

InitFrom::InitFrom(Flags& f) {
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

void InitFrom::check(Flags& f, const std::string& resume) const {
  if (!skip.empty() && path.empty()) f.fail("--init-skip goes with --init-from");
  if (!path.empty() && !resume.empty() && resume != "auto")
    f.fail("--init-from starts a new run and --resume " + resume +
           " continues one: give one of them (--resume auto goes with --init-from: it resumes once the run has "
           "a checkpoint)");
}

bool under_prefix(const std::string& name, const std::string& prefix) {
  if (prefix.empty() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return name.size() == prefix.size() || prefix.back() == '.' || name[prefix.size()] == '.';
}

std::map<std::string, std::string> with_init_record(std::map<std::string, std::string> meta, const InitFrom& init) {
  if (init.path.empty()) return meta;
  meta["init_from"] = init.path;
  std::string skip;
  for (const std::string& p : init.skip) skip += (skip.empty() ? "" : ",") + p;
  if (!skip.empty()) meta["init_skip"] = skip;
  return meta;
}

std::string init_from_checkpoint(nn::Module& model, const InitFrom& init) {
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
  const nn::StateDict load = match(model.state_dict(), saved, init.skip, problems, skipped);
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

}  // namespace ember::train
