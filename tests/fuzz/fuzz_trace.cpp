// Trace CSVs with any column mapping: the input's first line is the mapping as `ember sched
// simulate --columns` takes it ("submit=arrival,gpus=num_gpu"), its first byte also picks the
// time unit and whether estimates are exact; the rest is the CSV.
#include <sstream>

#include "fuzz_support.h"
#include "scheduler/sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string all(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nl = all.find('\n');
  const std::string mapping = nl == std::string::npos ? all : all.substr(0, nl);
  const std::string csv = nl == std::string::npos ? std::string() : all.substr(nl + 1);
  fuzz::errors_only([&] {
    ember::sched::TraceOptions opt;
    opt.columns = ember::sched::ColumnMap::parse(mapping);
    static const double kUnits[4] = {1.0, 60.0, 1e-3, 3600.0};
    opt.time_unit = kUnits[data[0] & 3];
    opt.exact_estimates = (data[0] & 4) != 0;
    std::istringstream in(csv);
    (void)ember::sched::parse_trace(in, "fuzz.csv", opt);
  });
  return 0;
}
