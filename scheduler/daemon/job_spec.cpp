#include "scheduler/daemon/job_spec.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ember::sched {
namespace {

// Collects the text parser's complaints so that the ember::Error can quote the first with its
// position (the parser's default is to log them to stderr).
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (first.empty()) first = detail::concat(line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  std::string first;
};

}  // namespace

std::string parse_text_format(const std::string& text, google::protobuf::Message* out) {
  google::protobuf::TextFormat::Parser parser;
  Collector errors;
  parser.RecordErrorsTo(&errors);
  if (parser.ParseFromString(text, out)) return {};
  return errors.first.empty() ? " not a valid " + out->GetDescriptor()->name() + " in text format" : errors.first;
}

proto::JobSpec parse_job_spec(const std::string& text, const std::string& origin) {
  proto::JobSpec spec;
  const std::string err = parse_text_format(text, &spec);
  if (!err.empty())
    EMBER_FAIL("job spec ", origin, ":", err,
               " (fields: name, command, args, devices, memory_gib, expected_seconds, priority, queue, "
               "checkpoint_dir, checkpoint_interval_s, max_restarts, env, workdir)");
  validate_spec(spec, origin);
  return spec;
}

std::string read_text_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  EMBER_CHECK(!std::filesystem::is_directory(path, ec), what, " ", path, ": is a folder, expected a text-format file");
  std::ifstream in(path);
  EMBER_CHECK(in, what, " ", path, ": cannot open it for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

proto::JobSpec read_job_spec(const std::string& path) {
  return parse_job_spec(read_text_file(path, "job spec"), path);
}

std::string program_search_path(const proto::JobSpec& spec) {
  auto env_path = spec.env().find("PATH");
  if (env_path != spec.env().end()) return env_path->second;
  const char* path = std::getenv("PATH");
  return path ? path : "/usr/bin:/bin";
}

void validate_spec(const proto::JobSpec& spec, const std::string& origin) {
  EMBER_CHECK(!spec.command().empty(), "job spec ", origin,
              ": no command; expected e.g. command: \"./train\" (arguments go in args: [...])");
  EMBER_CHECK(!spec.has_devices() || spec.devices() >= 1, "job spec ", origin,
              ": devices must be a whole number >= 1 (the gang size), got ", spec.devices());
  EMBER_CHECK(std::isfinite(spec.memory_gib()) && spec.memory_gib() >= 0, "job spec ", origin,
              ": memory_gib must be >= 0 GiB per device, got ", spec.memory_gib());
  EMBER_CHECK(!spec.has_expected_seconds() || (std::isfinite(spec.expected_seconds()) && spec.expected_seconds() > 0),
              "job spec ", origin, ": expected_seconds must be > 0, got ", spec.expected_seconds());
  EMBER_CHECK(!spec.has_checkpoint_interval_s() ||
                  (std::isfinite(spec.checkpoint_interval_s()) && spec.checkpoint_interval_s() >= 0),
              "job spec ", origin, ": checkpoint_interval_s must be >= 0 seconds (0: checkpoints when stopped), got ",
              spec.checkpoint_interval_s());
  EMBER_CHECK(!spec.has_elastic() || (spec.elastic().min() >= 1 && spec.elastic().min() <= spec.elastic().max()),
              "job spec ", origin, ": elastic must have 1 <= min <= max devices, got min ", spec.elastic().min(),
              " and max ", spec.elastic().max());
  EMBER_CHECK(!spec.has_elastic() || (spec.elastic().max_batch() >= 0 && spec.elastic().max_batch() <= (1LL << 40)),
              "job spec ", origin, ": elastic.max_batch must be a global batch in [0, 2^40] (0: none), got ",
              spec.elastic().max_batch());
  EMBER_CHECK(!spec.has_max_restarts() || spec.max_restarts() >= 0, "job spec ", origin,
              ": max_restarts must be >= 0, got ", spec.max_restarts());
  for (const auto& [k, v] : spec.env())
    EMBER_CHECK(!k.empty() && k.find('=') == std::string::npos && k.find('\0') == std::string::npos, "job spec ",
                origin, ": environment variable name '", k, "' is not valid (non-empty, no '=')");
  // exec() ends every string at its first NUL byte: a command or argument holding one would run
  // something other than what the spec says.
  EMBER_CHECK(spec.command().find('\0') == std::string::npos, "job spec ", origin, ": the command contains a NUL byte");
  for (int i = 0; i < spec.args_size(); ++i)
    EMBER_CHECK(spec.args(i).find('\0') == std::string::npos, "job spec ", origin, ": argument ", i + 1,
                " contains a NUL byte");
  for (const auto& [k, v] : spec.env())
    EMBER_CHECK(v.find('\0') == std::string::npos, "job spec ", origin, ": the value of ", k, " contains a NUL byte");
  std::error_code ec;
  EMBER_CHECK(spec.checkpoint_dir().empty() || !std::filesystem::exists(spec.checkpoint_dir(), ec) ||
                  std::filesystem::is_directory(spec.checkpoint_dir(), ec),
              "job spec ", origin, ": checkpoint_dir '", spec.checkpoint_dir(), "' exists and is not a folder");
}

proto::ElasticRange parse_elastic(const std::string& text, const std::string& flag) {
  const size_t colon = text.find(':');
  const auto number = [&](const std::string& s) {
    long long v = 0;
    size_t used = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    EMBER_CHECK(
        used > 0 && used == s.size() && std::isdigit(static_cast<unsigned char>(s[0])) && v >= 1 && v <= (1 << 20),
        flag, ": expected MIN:MAX, two whole numbers of devices 1 <= MIN <= MAX, got '", text, "' ('", s,
        "' is not a number >= 1)");
    return static_cast<int>(v);
  };
  EMBER_CHECK(colon != std::string::npos, flag,
              ": expected MIN:MAX, two whole numbers of devices 1 <= MIN <= MAX, got '", text, "' (no ':')");
  proto::ElasticRange r;
  r.set_min(number(text.substr(0, colon)));
  r.set_max(number(text.substr(colon + 1)));
  EMBER_CHECK(r.min() <= r.max(), flag, ": expected MIN:MAX with MIN <= MAX, got '", text, "'");
  return r;
}

int spec_devices(const proto::JobSpec& spec) {
  if (spec.has_elastic()) return spec.elastic().min();
  return spec.has_devices() ? spec.devices() : 1;
}

JobSpec to_sched_spec(const proto::JobSpec& spec, double submit_time) {
  JobSpec s;
  s.name = spec.name();
  s.submit = submit_time;
  s.gpus = spec_devices(spec);
  s.mem_per_gpu = spec.memory_gib();
  s.duration = -1;
  s.estimate = spec.has_expected_seconds() ? spec.expected_seconds() : -1;
  s.priority = spec.priority();
  s.queue = spec.queue();
  s.model = spec.model();
  s.checkpoint_interval = spec.checkpoint_interval_s();
  return s;
}

std::string spec_to_text(const proto::JobSpec& spec) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(spec, &out);
  return out;
}

}  // namespace ember::sched
