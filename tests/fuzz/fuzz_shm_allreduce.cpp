// The shared-memory all-reduce's segment as a broken or foreign peer might leave it: rank 0 of 2
// runs one all-reduce while everything rank 1 owns in the segment (its counters, its descriptions
// of each piece, its slots) holds the input's bytes. Rank 0 must finish the operation or fail it
// with an ember::Error (the ranks disagree), reading and writing only inside the segment, and
// never spin: step() is called a bounded number of times. The first bytes pick the tensor's dtype,
// length, reduction and the slot size.
#include <cstring>
#include <vector>

#include "core/tensor.h"
#include "dist/shm_allreduce.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ember;
  if (size < 5) return 0;
  static const DType kTypes[8] = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                  DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
  const DType dt = kTypes[data[0] % 8];
  const auto op = static_cast<dist::ReduceOp>(data[1] % 3);
  const size_t slot_bytes = 64 * (1 + data[2] % 4);
  const int64_t numel = 1 + (data[3] | (data[4] << 8)) % 300;
  const uint8_t* peer = data + 5;
  const size_t peer_size = size - 5;

  // The segment, aligned as the real one may not be (ShmAllReduce aligns it itself).
  const size_t bytes = dist::ShmAllReduce::bytes_needed(2, slot_bytes);
  std::vector<unsigned char> segment(bytes + 1, 0);
  dist::ShmAllReduce ar(segment.data() + 1, 0, 2, slot_bytes);
  // Rank 1's line (the second 128-byte line after the alignment) and its descriptions and slots
  // (the odd-numbered ones of each set) get the input, repeated to fill them.
  auto* base = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(segment.data() + 1) + 63) / 64 * 64);
  const size_t line = 128, desc = 64, stride = desc + ar.slot_bytes();
  std::vector<std::pair<size_t, size_t>> peer_ranges = {{line, line}};
  for (int set = 0; set < 2; ++set) peer_ranges.push_back({2 * line + (2 * set + 1) * stride, stride});
  size_t k = 0;
  for (auto [off, len] : peer_ranges)
    for (size_t i = 0; i < len && peer_size > 0; ++i) base[off + i] = peer[k++ % peer_size];

  dist::ShmAllReduce::Job job;
  job.t = empty({numel}, {dt, Device::cpu()});
  std::memset(job.t.raw_data(), 0x3c, static_cast<size_t>(numel) * job.t.itemsize());
  job.op = op;
  job.what = "fuzz";
  for (int i = 0; i < 64 && !job.finished; ++i) ar.step(job);
  if (job.error) fuzz::errors_only([&] { std::rethrow_exception(job.error); });
  return 0;
}
