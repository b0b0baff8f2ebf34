// The CUDA side of core/step_graph.h: a step captured with cudaStreamBeginCapture on the current
// stream, allocating from a private pool of the caching allocator, instantiated once and replayed
// with cudaGraphLaunch. And the guard every host wait of the backend passes through, so that a
// wait inside a capture is refused with the reason instead of invalidating it.
// Include only from core/cuda (the header pulls in the CUDA runtime's).
#pragma once

#include <cuda_runtime_api.h>

namespace ember::cuda {

// Throws ember::Error naming `what` (e.g. "a device-to-host copy (item(), to(cpu))") when `s` is
// being captured into a CUDA graph: the host would wait for work that is only being recorded.
void refuse_host_wait_in_capture(cudaStream_t s, const char* what);

}  // namespace ember::cuda
