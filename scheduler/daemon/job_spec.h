// Job specs for the live daemon: reading them from Protobuf text format (proto/job.proto), checking
// them, and turning them into the policies' JobSpec. Every mistake is an ember::Error that names
// the file and what was expected: an unknown field or a syntax error with its line and column, a
// missing command, a gang or memory size that cannot be.
#pragma once

#include <string>

#include "job.pb.h"
#include "scheduler/job.h"

namespace ember::sched {

// Parses Protobuf text format into `out`; returns "" or the first error as "LINE:COLUMN: what".
std::string parse_text_format(const std::string& text, google::protobuf::Message* out);

// Parses `text` (named `origin` in messages) and validates it (validate_spec).
proto::JobSpec parse_job_spec(const std::string& text, const std::string& origin);
proto::JobSpec read_job_spec(const std::string& path);

// A whole text file (a spec, the daemon's configuration); errors name it as "`what` PATH".
std::string read_text_file(const std::string& path, const std::string& what);

// Where the job's command is looked up: its own PATH when the spec sets one, else the daemon's.
std::string program_search_path(const proto::JobSpec& spec);

// Throws ember::Error for a spec no pool could run: no command, devices < 1, negative memory or
// estimate, negative restarts, an environment variable name that is empty or holds '='.
void validate_spec(const proto::JobSpec& spec, const std::string& origin);

// The gang size, 1 when not given; an elastic job's minimum.
int spec_devices(const proto::JobSpec& spec);

// `--elastic MIN:MAX` (named `flag` in errors): an ember::Error unless both are whole numbers with
// 1 <= MIN <= MAX.
proto::ElasticRange parse_elastic(const std::string& text, const std::string& flag);

// What the policies see: no true duration (a live job's is unknown), the estimate when given.
JobSpec to_sched_spec(const proto::JobSpec& spec, double submit_time);

// The spec in text format, one field a line (for `ember sched status --job N`).
std::string spec_to_text(const proto::JobSpec& spec);

}  // namespace ember::sched
