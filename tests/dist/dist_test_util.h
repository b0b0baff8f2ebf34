// Shared by the distributed suites: the process's one communicator (made by main.cpp, which
// every rank runs under mpirun) and helpers that compare per-rank results with serial references.
#pragma once

#include <gtest/gtest.h>

#include "core/ops.h"
#include "dist/comm.h"
#include "test_helpers.h"

namespace dist_test {

ember::dist::Communicator& comm();

// Every rank's value of `v` (a collective: all ranks must call it).
std::vector<double> gather(double v);

}  // namespace dist_test
