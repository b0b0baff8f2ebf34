// What the Slurm backend (slurm.h) reads from Slurm's commands, parsed apart from running them so
// that the parsing can be tested and fuzzed on any text (tests/fuzz/fuzz_slurm.cpp): the output
// of another program is outside input like a file's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "scheduler/daemon/pool.h"
#include "scheduler/daemon/slurm.h"

namespace ember::sched {

// Most devices one node may bring (as `--devices cpu:N` allows) and a whole pool (the policies
// search a topology per decision; far past any cluster one daemon runs).
inline constexpr int kSlurmMaxNodeDevices = 4096;
inline constexpr int kSlurmMaxPoolDevices = 65536;

// `sinfo -h -N -o '%N|%c|%G'` (node|CPUs|GRES per line): each node's GPUs (GRES gpu:K) as
// devices, or one device per CPU on nodes without GPUs; a node listed again (one line per
// partition) counts once. Throws ember::Error naming the line for a count that is not a whole
// number of devices within the limits above, or when no node is listed.
Pool parse_sinfo(const std::string& out, const std::string& partition);

// `sbatch --parsable` prints "ID" or "ID;cluster": the job id, or nothing when it is not one.
std::optional<int64_t> parse_sbatch_id(const std::string& out);

// `scontrol show job -o ID` of a job Slurm knows: its state, reason and, once ended, exit code.
SlurmJob parse_scontrol_job(const std::string& out);

// `squeue -h -o %i`: the newest (largest) job id listed, if any.
std::optional<int64_t> parse_squeue_newest(const std::string& out);

}  // namespace ember::sched
