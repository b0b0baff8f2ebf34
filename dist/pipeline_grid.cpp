#include "dist/pipeline_grid.h"

#include "core/error.h"

namespace ember::dist {

PipelineGrid make_pipeline_grid(Communicator& world, int stages) {
  const int n = world.size();
  EMBER_CHECK(stages >= 1 && stages <= n && n % stages == 0, "pipeline: ", stages, " stages do not divide the ", n,
              " ranks of this job into equal replicas (expected a divisor of ", n, ")");
  PipelineGrid g;
  g.stages = stages;
  g.replicas = n / stages;
  g.stage = world.rank() / g.replicas;
  g.replica = world.rank() % g.replicas;
  for (int s = 0; s < stages; ++s) g.stage_ranks.push_back(s * g.replicas + g.replica);
  if (g.replicas > 1) g.replicas_comm = world.split(g.stage, g.replica);
  return g;
}

std::string PipelineGrid::describe() const {
  return detail::concat(stages, stages == 1 ? " stage" : " stages", " x ", replicas,
                        replicas == 1 ? " replica" : " replicas", ": this rank is stage ", stage, " of replica ",
                        replica);
}

}  // namespace ember::dist
