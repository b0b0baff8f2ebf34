// Checkpoints of a pipeline job in the one-process format, so that it resumes on another stage
// count, with or without data parallelism, or in one process (load_training). Each stage of the
// first replica writes its layers, buffers and optimizer state to <dir>/last.stage<S>.ckpt and
// every rank its generators and position to <dir>/last.rank<R>.ckpt; after a barrier, world rank 0
// joins the stage files into <dir>/last.ckpt: the whole model and one optimizer over all its
// parameters, in the whole model's order, as one process would have written them. The stage
// files stay beside it (a last.ckpt always has complete stage and rank files).
//
// Every stage must train with one optimizer holding exactly Pipeline::parameters() in one group;
// the directory must be visible to every rank (a shared file system), as for save_distributed.
#pragma once

#include <map>
#include <string>

#include "dist/ddp_checkpoint.h"
#include "dist/pipeline.h"
#include "layers/checkpoint.h"

namespace ember::dist {

// Collectives over pipe.comm(). `state`: the stage's optimizer (one) and the generators; its
// model, if set, must be pipe.model().
void save_pipeline(const std::string& dir, Pipeline& pipe, const TrainingState& state, TrainingPosition position,
                   const std::map<std::string, std::string>& metadata = {});

// Loads <dir>/last.ckpt into the whole model and this stage's slice of its optimizer state. The
// generators come from this rank's file when the job has the layout that wrote it, else (with
// allow_reshard) from rank 0's; an ember::Error otherwise.
DistributedResume load_pipeline(const std::string& dir, Pipeline& pipe, const TrainingState& state,
                                bool allow_reshard = false);

std::string stage_checkpoint_path(const std::string& dir, int stage);

}  // namespace ember::dist
