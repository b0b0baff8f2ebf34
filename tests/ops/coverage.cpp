#include "coverage.h"

#include <ember/config.h>

#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "core/dispatch.h"

namespace ember::ops_test {
namespace {

std::mutex g_mu;
std::string g_backend;
DeviceType g_backend_type = DeviceType::CPU;
std::set<std::pair<const void*, std::string>> g_hits;
size_t g_calls = 0;  // calls on the current backend's device since the last record_hits_as

// Only calls on the backend's own device count: the reference and the inputs' staging run on the
// CPU meanwhile.
void observe(const void* stub, DeviceType t, int) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_backend.empty() && t == g_backend_type) {
    g_hits.insert({stub, g_backend});
    ++g_calls;
  }
}

// Stubs that have no kernel on a backend by design, with the reason (a stub missing elsewhere is
// a failure).
const std::map<std::pair<std::string, DeviceType>, std::string>& by_design() {
  static const std::map<std::pair<std::string, DeviceType>, std::string> m = {
      {{"adam_multi_step_stub", DeviceType::CPU},
       "the CPU steps parameter by parameter (adam_step_stub); the multi-tensor step saves launches"},
      {{"grad_norm_total_stub", DeviceType::CPU},
       "the CPU sums per-tensor norms (grad_norm_stub); the fused one saves synchronisations"},
  };
  return m;
}

}  // namespace

void record_hits_as(const Backend& b) {
  set_dispatch_observer(&observe);
  std::lock_guard<std::mutex> lock(g_mu);
  g_backend = b.name;
  g_backend_type = b.device.type;
  g_calls = 0;
}

size_t calls_on_backend() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_calls;
}

void pause_hits() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_backend.clear();
}

std::vector<std::string> coverage_failures(const std::vector<const Backend*>& backends) {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(g_mu);
  for (const StubInfo& s : registered_stubs()) {
    for (const Backend* b : backends) {
      const DeviceType t = b->device.type;
      if (t == DeviceType::CUDA && !EMBER_WITH_CUDA) continue;  // not a backend of this build
      const bool exempt = by_design().count({s.name, t}) > 0;
      if (!s.has(s.stub, t)) {
        if (!exempt)
          out.push_back(std::string(s.name) + " has no kernel for " + b->device.str() + " (" + b->name + ")");
        continue;
      }
      if (exempt) {
        out.push_back(std::string(s.name) + " is listed as having no kernel for " + b->device.str() +
                      " but has one: remove it from the list in tests/ops/coverage.cpp");
        continue;
      }
      if (!b->unavailable().empty()) continue;
      if (!g_hits.count({s.stub, b->name}))
        out.push_back(std::string(s.name) + " is reached by no row of the op table on " + b->name);
    }
  }
  return out;
}

std::string coverage_summary(const std::vector<const Backend*>& backends) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::ostringstream os;
  const size_t stubs = registered_stubs().size();
  size_t total = 0;
  for (const Backend* b : backends) {
    size_t n = 0;
    for (const auto& h : g_hits)
      if (h.second == b->name) ++n;
    total += n;
    os << "  " << b->name << ": " << n << " of " << stubs << " stubs reached"
       << (b->unavailable().empty() ? "" : " (not run here)") << "\n";
  }
  os << "  (stub, backend) pairs reached: " << total << "\n";
  return os.str();
}

}  // namespace ember::ops_test
