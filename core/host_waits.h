// How many times this process's host has read device memory back, and so waited for the device's
// queued work: every copy into host memory from a device (Tensor::to(cpu), item(), to_vector) and
// every kernel flag a backend reads on the host (cuda::copy_to_host). Tests hold the hot path of a
// training step to none (GradScaler on a device: tests/emu/grad_scaler_emu_test.cpp); a count, not
// a time, so it means the same on the kernel emulator and on a GPU.
#pragma once

#include <cstdint>

namespace ember {

uint64_t host_wait_count();
void count_host_wait();

}  // namespace ember
