// The elastic simulator's policies (elastic/simulator.h), one file each, one line each in
// elastic/registry.cpp.
#pragma once

#include <memory>

#include "scheduler/elastic/simulator.h"

namespace ember::sched::elastic {

std::unique_ptr<ElasticPolicy> make_tiresias(const PolicyParams& params);
std::unique_ptr<ElasticPolicy> make_goodput(const PolicyParams& params);

}  // namespace ember::sched::elastic
