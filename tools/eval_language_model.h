// `ember eval` of a language model's checkpoint (`ember train` on a model file whose task is
// language_model): held-out loss, perplexity and next-token accuracy through the examples'
// evaluate_lm, on the corpus rebuilt from the file's text source with the run's --limit (which the
// checkpoint records), whose vocabulary must be the vocab.txt saved beside the checkpoint.
#pragma once

#include <optional>
#include <string>

#include "core/device.h"
#include "interop/model_file.h"
#include "tools/saved_model.h"

namespace ember::tools {

// The model file of --model-file, else the one the checkpoint records, when its task is a language
// model; nullopt otherwise (a classifier's, or none: the classifier path says what is missing).
std::optional<model_file::LoadedFile> language_model_file(SavedCheckpoint& ckpt, const std::string& model_file);

struct LmEval {
  SavedCheckpoint* ckpt = nullptr;
  std::string data;  // a fortune file or folder ("": the file's text source)
  long limit = -1;   // the first N fortunes; -1 and not given: the run's
  bool limit_given = false;
  Device dev;
  bool json = false;
};
// Prints the result; returns the exit status.
int eval_language_model(const model_file::LoadedFile& file, const LmEval& e);

}  // namespace ember::tools
