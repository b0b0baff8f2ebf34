#include "dist/pipeline_checkpoint.h"

#include <filesystem>
#include <set>

#include "core/error.h"

namespace ember::dist {
namespace {

// The stage's one optimizer, checked to hold exactly the stage's parameters in one group: its
// state then maps position by position onto a slice of the whole model's parameters.
optim::Optimizer& stage_optimizer(Pipeline& pipe, const TrainingState& state, const char* what) {
  EMBER_CHECK(!state.model || state.model == &pipe.model(), what,
              ": the training state's model must be the pipeline's whole model (or unset)");
  EMBER_CHECK(state.optimizers.size() == 1, what, ": expected one optimizer per stage, got ", state.optimizers.size());
  optim::Optimizer& opt = *state.optimizers[0];
  const auto want = pipe.parameters();
  bool same = opt.param_groups().size() == 1 && opt.param_groups()[0].params.size() == want.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = opt.param_groups()[0].params[i].impl() == want[i].impl();
  EMBER_CHECK(same, what, ": ", pipe.describe(),
              "'s optimizer must hold exactly Pipeline::parameters(), in order, in one parameter group");
  return opt;
}

// Positions of this stage's parameters among the whole model's (Module::parameters() order).
std::vector<size_t> stage_slots(Pipeline& pipe) {
  const auto all = pipe.model().parameters();
  std::vector<size_t> slots;
  for (const Tensor& p : pipe.parameters())
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].impl() == p.impl()) slots.push_back(i);
  return slots;
}

std::string layout_of(const Pipeline& pipe, int world_size) {
  return std::to_string(pipe.stages()) + " stages, " + std::to_string(world_size) + " ranks";
}

}  // namespace

std::string stage_checkpoint_path(const std::string& dir, int stage) {
  return (std::filesystem::path(dir) / ("last.stage" + std::to_string(stage) + ".ckpt")).string();
}

void save_pipeline(const std::string& dir, Pipeline& pipe, const TrainingState& state, TrainingPosition position,
                   const std::map<std::string, std::string>& metadata) {
  optim::Optimizer& opt = stage_optimizer(pipe, state, "save_pipeline");
  Communicator& comm = pipe.comm();
  position.world_size = comm.size();
  position.rank = comm.rank();
  std::filesystem::create_directories(dir);
  CheckpointContents mine;
  for (const auto& [name, gen] : state.generators) mine.generators.emplace_back(name, gen->state());
  mine.position = position;
  mine.metadata = metadata;
  mine.metadata["pipeline_layout"] = layout_of(pipe, comm.size());
  write_checkpoint(rank_checkpoint_path(dir, comm.rank()), mine);
  if (pipe.first_replica()) {
    CheckpointContents stage;
    std::set<std::string> params;
    for (const auto& [name, t] : pipe.stage_module().named_parameters()) params.insert(name);
    for (auto& [name, t] : pipe.stage_module().state_dict())
      (params.count(name) ? stage.model_parameters : stage.model_buffers).emplace_back(name, t);
    stage.optimizers.push_back(opt.state_dict());
    stage.position = position;
    write_checkpoint(stage_checkpoint_path(dir, pipe.stage()), stage);
  }
  comm.barrier("pipeline checkpoint stage files")->wait();
  if (comm.rank() == 0) {
    // The stages' pieces in the whole model's order, as one process would have written them.
    std::map<std::string, Tensor> tensors;
    std::vector<CheckpointContents> stages;
    for (int s = 0; s < pipe.stages(); ++s) {
      stages.push_back(read_checkpoint(stage_checkpoint_path(dir, s)));
      for (auto* list : {&stages.back().model_parameters, &stages.back().model_buffers})
        for (auto& [name, t] : *list) tensors[name] = t;
    }
    CheckpointContents whole;
    std::set<std::string> params;
    for (const auto& [name, t] : pipe.model().named_parameters()) params.insert(name);
    for (const auto& [name, t] : pipe.model().state_dict()) {
      EMBER_CHECK(tensors.count(name), "save_pipeline: no stage file in '", dir, "' holds '", name, "'");
      (params.count(name) ? whole.model_parameters : whole.model_buffers).emplace_back(name, tensors[name]);
    }
    optim::OptimizerState o = opt.state_dict();
    o.params.assign(1, {});
    for (const auto& st : stages) {
      EMBER_CHECK(
          st.optimizers.size() == 1 && st.optimizers[0].params.size() == 1 && st.optimizers[0].optimizer == o.optimizer,
          "save_pipeline: a stage file in '", dir, "' holds another kind of optimizer state");
      for (const auto& p : st.optimizers[0].params[0]) o.params[0].push_back(p);
    }
    whole.optimizers.push_back(std::move(o));
    whole.generators = mine.generators;
    for (const ScheduleRef& s : state.schedulers) whole.schedulers.push_back({s.kind(), s.state_dict()});
    whole.position = position;
    whole.metadata = mine.metadata;
    whole.metadata["world_size"] = std::to_string(comm.size());
    write_checkpoint(main_checkpoint_path(dir), whole);
  }
  // Nobody goes on (and possibly writes the next checkpoint) before last.ckpt is complete.
  comm.barrier("pipeline checkpoint written")->wait();
}

DistributedResume load_pipeline(const std::string& dir, Pipeline& pipe, const TrainingState& state,
                                bool allow_reshard) {
  optim::Optimizer& opt = stage_optimizer(pipe, state, "load_pipeline");
  Communicator& comm = pipe.comm();
  const std::string main = main_checkpoint_path(dir);
  EMBER_CHECK(std::filesystem::exists(main), "load_pipeline: no checkpoint at '", main, "'");
  CheckpointContents c = read_checkpoint(main);
  const auto written = c.metadata.count("pipeline_layout") ? c.metadata["pipeline_layout"] : std::string("1 process");
  const bool reshard = written != layout_of(pipe, comm.size());
  EMBER_CHECK(!reshard || allow_reshard, "load_pipeline: '", main, "' was written by a job of ", written,
              ", this job has ", layout_of(pipe, comm.size()),
              "; start it the same way, or allow resharding (--reshard) to continue with the global batch order kept "
              "and rank 0's random state on every rank");
  EMBER_CHECK(c.optimizers.size() == 1 && c.optimizers[0].params.size() == 1, "load_pipeline: '", main,
              "' must hold one optimizer with one parameter group (a pipeline's or one process's)");
  // This stage's slice of the whole optimizer, then everything through load_training's checks.
  const auto slots = stage_slots(pipe);
  const auto& all = c.optimizers[0].params[0];
  EMBER_CHECK(all.size() == pipe.model().parameters().size(), "load_pipeline: '", main, "' has optimizer state for ",
              all.size(), " parameters, the model has ", pipe.model().parameters().size());
  optim::OptimizerState slice = c.optimizers[0];
  slice.params.assign(1, {});
  for (size_t i : slots) slice.params[0].push_back(all[i]);
  pipe.model().load_state_dict(c.model_state());
  opt.load_state_dict(slice);
  EMBER_CHECK(c.schedulers.size() == state.schedulers.size(), "load_pipeline: '", main, "' holds ", c.schedulers.size(),
              " LR schedules but the program has ", state.schedulers.size());
  for (size_t i = 0; i < c.schedulers.size(); ++i) state.schedulers[i].load_state_dict(c.schedulers[i].state);

  std::vector<std::pair<std::string, GeneratorState>> gens = c.generators;
  DistributedResume out{c.position, c.metadata, reshard};
  if (!reshard) {
    const std::string own = rank_checkpoint_path(dir, comm.rank());
    EMBER_CHECK(std::filesystem::exists(own), "load_pipeline: '", main, "' has no rank file '", own,
                "' beside it (the checkpoint directory is incomplete)");
    CheckpointContents r = read_checkpoint(own);
    gens = r.generators;
    out.position.loader_epoch = r.position.loader_epoch;
    out.position.loader_batch = r.position.loader_batch;
  }
  for (const auto& [name, gen] : state.generators) {
    bool found = false;
    for (const auto& [n, s] : gens)
      if (n == name) {
        gen->set_state(s);
        found = true;
      }
    EMBER_CHECK(found, "load_pipeline: '", dir, "' has no state for generator '", name, "'");
  }
  comm.barrier("pipeline checkpoint loaded")->wait();
  return out;
}

}  // namespace ember::dist
