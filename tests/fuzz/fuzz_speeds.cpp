// Speed tables (`ember sched simulate --speeds FILE`, scheduler/speeds.h) on arbitrary text, then
// used as the heterogeneous simulation uses them: every model on every type looked up (each speed
// a finite number > 0) and jobs given models by the table.
#include <cmath>

#include "fuzz_support.h"
#include "scheduler/speeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::errors_only([&] {
    using namespace ember::sched;
    const SpeedTable t = SpeedTable::parse(text, "fuzz.csv");
    for (const std::string& m : t.models())
      for (const std::string& d : t.types()) {
        const double s = t.speed(m, d);
        if (!(s > 0) || !std::isfinite(s)) std::abort();
      }
    std::vector<JobSpec> jobs(3);
    jobs[0].name = "a", jobs[1].name = "job-17", jobs[2].model = t.models().back();
    t.assign_models(jobs);
    for (const JobSpec& j : jobs) (void)t.speed(j.model, t.types().front());
  });
  return 0;
}
