// The trace reader: the shipped formats, column mapping, units, and an ember::Error naming
// file:line and the expectation for every kind of bad input.
#include "scheduler/sim/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "shared_data.h"

namespace ember::sched {
namespace {

std::vector<JobSpec> parse(const std::string& text, const TraceOptions& opt = {}) {
  std::istringstream in(text);
  return parse_trace(in, "t.csv", opt);
}

// The message of the ember::Error that parsing `text` throws ("" if none).
std::string error_of(const std::string& text, const TraceOptions& opt = {}) {
  try {
    parse(text, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The shared traces sit beside the repository (../shared/data/traces from its root).
std::string traces_dir() {
  return (std::filesystem::path(EMBER_SOURCE_DIR) / "../shared/data/traces").lexically_normal().string();
}

TEST(Trace, PhillyFormat) {
  auto jobs = parse("job_id,submit_time,num_gpus,duration,vc\n0,116,1,66,11cb48\n1,717,8,159721,ee9e8c\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].name, "0");
  EXPECT_EQ(jobs[0].submit, 116);
  EXPECT_EQ(jobs[0].gpus, 1);
  EXPECT_EQ(jobs[0].duration, 66);
  EXPECT_EQ(jobs[0].estimate, 66);  // no estimate column: the duration
  EXPECT_EQ(jobs[0].queue, "11cb48");
  EXPECT_EQ(jobs[1].gpus, 8);
  EXPECT_EQ(jobs[1].duration, 159721);
}

TEST(Trace, TiresiasFormatWithExtraColumns) {
  auto jobs = parse(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n"
      "1,8,30,133,vgg11,147,23\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[1].gpus, 8);
  EXPECT_EQ(jobs[1].submit, 30);
  EXPECT_EQ(jobs[1].duration, 147);
}

TEST(Trace, ShippedTraces) {
  std::string philly = traces_dir() + "/philly_w41.csv";
  EMBER_NEEDS_SHARED_FILE(philly);
  auto jobs = read_trace(philly);
  EXPECT_EQ(jobs.size(), 12465u);
  EXPECT_EQ(jobs.front().submit, 116);
  EXPECT_EQ(jobs.back().submit, 604314);
  auto t60 = read_trace(traces_dir() + "/tiresias_60_job.csv");
  EXPECT_EQ(t60.size(), 60u);
}

TEST(Trace, ColumnMappingUnitsAndOptionalFields) {
  TraceOptions opt;
  opt.columns =
      ColumnMap::parse("submit=arrive, gpus = width,duration=run,estimate=guess,priority=prio,queue=team,mem=gib");
  opt.time_unit = 60;
  auto jobs = parse("arrive,width,run,guess,prio,team,gib\n2,4,1.5,,3,ml,40\n1,1,2,3,-1,cv,0\n", opt);
  ASSERT_EQ(jobs.size(), 2u);
  // Sorted by submit time; names default to the line number.
  EXPECT_EQ(jobs[0].name, "line3");
  EXPECT_EQ(jobs[0].submit, 60);
  EXPECT_EQ(jobs[0].duration, 120);
  EXPECT_EQ(jobs[0].estimate, 180);
  EXPECT_EQ(jobs[0].priority, -1);
  EXPECT_EQ(jobs[1].estimate, -1);  // empty estimate cell: none
  EXPECT_EQ(jobs[1].priority, 3);
  EXPECT_EQ(jobs[1].queue, "ml");
  EXPECT_EQ(jobs[1].mem_per_gpu, 40);
  EXPECT_EQ(jobs[1].gpus, 4);
}

TEST(Trace, NoEstimatesOption) {
  TraceOptions opt;
  opt.exact_estimates = false;
  auto jobs = parse("submit,gpus,duration\n0,1,10\n", opt);
  EXPECT_EQ(jobs[0].estimate, -1);
}

TEST(Trace, QuotesCommentsBlankLinesAndCrLf) {
  auto jobs = parse("# a comment\n\njob_id,submit,gpus,duration,vc\r\n\"x,1\",0,1,5,\"team \"\"a\"\"\"\r\n\n# end\n");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].name, "x,1");
  EXPECT_EQ(jobs[0].queue, "team \"a\"");
}

TEST(Trace, Errors) {
  struct Case {
    std::string text, expect;
  };
  std::vector<Case> cases = {
      {"", "t.csv: empty file, expected a CSV header"},
      {"submit,gpus\n1,1\n", "t.csv:1: no column for the job's duration"},
      {"submit,gpus,duration\n", "t.csv: no jobs after the header on line 1"},
      {"submit,gpus,duration\n1,1\n", "t.csv:2: expected 3 comma-separated fields"},
      {"submit,gpus,duration\n1,1,5\nx,1,5\n", "t.csv:3: column 'submit': expected a submit time, got 'x'"},
      {"submit,gpus,duration\n1,0,5\n", "t.csv:2: column 'gpus': expected a whole number of devices >= 1, got '0'"},
      {"submit,gpus,duration\n1,1.5,5\n", "t.csv:2: column 'gpus': expected a whole number of devices >= 1"},
      {"submit,gpus,duration\n1,1,-5\n", "t.csv:2: column 'duration': expected a duration in [0, 1e+11] s"},
      {"submit,gpus,duration\n1,1,2e11\n", "t.csv:2: column 'duration': expected a duration in [0, 1e+11] s"},
      // A submit time so large that the simulator's clock could not advance (it once hung).
      {"submit,gpus,duration\n0,1,5\n1e18,1,5\n", "t.csv:3: column 'submit': expected a submit time in [0, 1e+11] s"},
      // A job from before the trace's start (issue 48: once accepted, and counted as waiting).
      {"submit,gpus,duration\n0,1,5\n-5,1,5\n",
       "t.csv:3: column 'submit': expected a submit time in [0, 1e+11] s from "
       "the trace's start, got '-5'"},
      {"submit,gpus,duration\n1,1,inf\n", "t.csv:2: column 'duration': expected a duration, got 'inf'"},
      {"job_id,submit,gpus,duration\na,1,1,5\na,2,1,5\n", "t.csv:3: job id 'a' already used on line 2"},
      {"submit,gpus,duration,estimate\n1,1,5,-1\n", "t.csv:2: column 'estimate': expected an estimate in [0, 1e+11]"},
      {"submit,gpus,duration,priority\n1,1,5,high\n", "t.csv:2: column 'priority': expected an integer priority"},
      {"submit,gpus,duration\n\"1,1,5\n", "t.csv:2: unterminated quoted field"},
      {"submit,submit,gpus,duration\n", "t.csv:1: header names column 'submit' twice"},
  };
  for (const Case& c : cases) {
    std::string msg = error_of(c.text);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "input:\n" << c.text << "\nmessage: " << msg;
  }
}

TEST(Trace, MappingErrors) {
  EXPECT_THROW(ColumnMap::parse("speed=x"), Error);
  EXPECT_THROW(ColumnMap::parse("submit"), Error);
  EXPECT_THROW(ColumnMap::parse(""), Error);
  TraceOptions opt;
  opt.columns = ColumnMap::parse("duration=runtime_s");
  EXPECT_NE(error_of("submit,gpus,duration\n1,1,5\n", opt).find("t.csv:1: --columns maps duration to 'runtime_s'"),
            std::string::npos);
}

TEST(Trace, MissingFile) {
  try {
    read_trace("/nonexistent/trace.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace /nonexistent/trace.csv: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace ember::sched
