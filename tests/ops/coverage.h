// Which kernel stubs the op table reaches on which backend, measured through the dispatch
// observer (core/dispatch.h), and the check that every stub has a kernel on every backend of the
// build and is reached there by some row.
#pragma once

#include <string>
#include <vector>

#include "backends.h"

namespace ember::ops_test {

// Starts recording; calls on b's device are attributed to b until the next call.
void record_hits_as(const Backend& b);
void pause_hits();
// Kernel calls on the recorded backend's device since record_hits_as.
size_t calls_on_backend();
// The failures of the coverage check for these backends (run after the whole table): one line per
// stub without a kernel on a backend the build has, or not reached there by any row.
std::vector<std::string> coverage_failures(const std::vector<const Backend*>& backends);
// "(stub, backend) pairs reached: N of M" and per backend, for the log.
std::string coverage_summary(const std::vector<const Backend*>& backends);

}  // namespace ember::ops_test
