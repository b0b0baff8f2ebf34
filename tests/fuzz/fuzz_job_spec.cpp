// Job specs as users write them (Protobuf text format, `ember sched submit --spec`) and as they
// travel (binary, inside a submit request): the first byte picks which. Both end in the daemon's
// validation and in the policies' view of the job.
#include "fuzz_support.h"
#include "scheduler/daemon/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  fuzz::errors_only([&] {
    ember::proto::JobSpec spec;
    if (data[0] & 1) {
      spec = ember::sched::parse_job_spec(bytes, "fuzz.pbtxt");
    } else {
      if (!spec.ParseFromString(bytes)) return;
      ember::sched::validate_spec(spec, "fuzz input");
    }
    (void)ember::sched::to_sched_spec(spec, 0);
    (void)ember::sched::spec_to_text(spec);
  });
  return 0;
}
