// The daemon's configuration file (`ember sched serve --config FILE`, scheduler/daemon/access.h:
// Protobuf text format) on arbitrary bytes, read and checked, then turned into the daemon's
// access rules (which look its users and groups up in the system's databases).
#include "fuzz_support.h"
#include "scheduler/daemon/access.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::scratch_file(data, size, ".config");
  fuzz::errors_only([&] {
    using namespace ember::sched;
    const ember::proto::DaemonConfig c = read_daemon_config(path);
    if (c.limits().max_devices() < 0 || c.limits().max_queued() < 0) std::abort();
    static const Identity self = self_identity();
    const Access access(c, self, path);
    const ember::proto::UserLimits& mine = access.limits_of(access.self().uid);
    if (mine.max_devices() < 0 || mine.max_queued() < 0) std::abort();
  });
  return 0;
}
