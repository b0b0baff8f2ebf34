// An allocator for tests that puts a guard zone of known bytes before and after every block and
// checks them when the block is freed, so a kernel that writes out of bounds is caught on any
// backend whose memory the host can read (the CPU and the emulated device). Under
// AddressSanitizer blocks have their exact size and no guard: ASan then reports the access itself,
// reads included, with the kernel's source line.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/allocator.h"

namespace ember::emu {

class GuardedAllocator final : public Allocator {
 public:
  // `label` names the allocator in the reports ("cpu", "emu").
  explicit GuardedAllocator(std::string label);
  DataPtr allocate(size_t nbytes) override;
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override {}

  // The out-of-bounds writes found so far (one line each: the allocator, the block's size, which
  // side, the first bad offset); take_violations() also clears them.
  std::vector<std::string> take_violations();
  static constexpr size_t kGuardBytes = 64;  // also keeps the block 64-byte aligned
  static constexpr unsigned char kGuardByte = 0xCD;

 private:
  void release(unsigned char* base, size_t nbytes);

  std::string label_;
  mutable std::mutex mu_;
  AllocatorStats stats_;
  std::vector<std::string> violations_;
};

}  // namespace ember::emu
