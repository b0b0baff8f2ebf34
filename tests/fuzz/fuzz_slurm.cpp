// What the daemon's Slurm backend reads from sinfo, sbatch, scontrol and squeue
// (scheduler/daemon/slurm_output.h), on arbitrary text: all four parsers read each input. A pool
// that parses has devices within the limits, each on a named node.
#include "fuzz_support.h"
#include "scheduler/daemon/slurm_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string out(reinterpret_cast<const char*>(data), size);
  fuzz::errors_only([&] {
    using namespace ember::sched;
    (void)parse_sbatch_id(out);
    const SlurmJob j = parse_scontrol_job(out);
    if (j.exit_code && (*j.exit_code < 0 || *j.exit_code > 255)) std::abort();
    const std::optional<int64_t> id = parse_squeue_newest(out);
    if (id && *id < 0) std::abort();
    const Pool p = parse_sinfo(out, "");
    if (p.devices.empty() || p.devices.size() > static_cast<size_t>(kSlurmMaxPoolDevices)) std::abort();
    for (const PoolDevice& d : p.devices)
      if (d.node.empty()) std::abort();
    (void)p.topology();
  });
  return 0;
}
