// The most data-loader worker threads anything asks for: --workers (train::Flags) and a model
// file's data.workers (interop/model_file.h) share the bound, so that a typo must not start
// 100,000 threads and the file and the flag refuse the same numbers.
#pragma once

namespace ember::data {

inline constexpr long long kMaxWorkers = 256;

}  // namespace ember::data
