// The registry of dispatch stubs and the tests' dispatch observer (core/dispatch.h).
#include "core/dispatch.h"

#include <mutex>

namespace ember {
namespace {

struct StubRegistry {
  std::mutex mu;
  std::vector<StubInfo> stubs;
};
// Function-local: stubs register during static initialisation, in any order across files.
StubRegistry& stub_registry() {
  static StubRegistry* r = new StubRegistry;  // never destroyed: stubs outlive static destruction
  return *r;
}

}  // namespace

detail::DispatchObserver detail::g_dispatch_observer = nullptr;

void detail::register_stub(const StubInfo& info) {
  StubRegistry& r = stub_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.stubs.push_back(info);
}

std::vector<StubInfo> registered_stubs() {
  StubRegistry& r = stub_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.stubs;
}

void set_dispatch_observer(detail::DispatchObserver f) {
  detail::g_dispatch_observer = f;
}

}  // namespace ember
