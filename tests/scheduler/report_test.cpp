// What `ember sched simulate` writes: the table with ratios, JSON with the issue's keys, CSV, SVG,
// and files written whole.
#include "scheduler/sim/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "sched_test_util.h"

namespace ember::sched {
namespace {

using testing::job;
using testing::run;

std::vector<SimResult> two_runs() {
  std::vector<JobSpec> jobs = {job("a", 0, 2, 100), job("b", 10, 4, 50), job("c", 20, 1, 30)};
  return {run("fcfs", jobs, 4), run("sjf", jobs, 4)};
}

TEST(Report, JsonHasTheIssueKeys) {
  std::string js = to_json(two_runs());
  for (const char* key : {"policy", "clairvoyant", "gpus", "jobs", "avg_jct", "p50_jct", "p99_jct", "makespan",
                          "busy_fraction", "avg_queue_delay", "preemptions_per_job", "max_slowdown"})
    EXPECT_EQ(testing::count_of(js, std::string("\"") + key + "\":"), 2u) << key;
  EXPECT_NE(js.find("\"policy\": \"fcfs\", \"clairvoyant\": false"), std::string::npos);
  EXPECT_NE(js.find("\"policy\": \"sjf\", \"clairvoyant\": true"), std::string::npos);
  EXPECT_NE(js.find("\"gpus\": 4, \"jobs\": 3"), std::string::npos);
  EXPECT_EQ(js.front(), '[');
  EXPECT_EQ(js[js.find_last_not_of("\n")], ']');
}

TEST(Report, CsvRows) {
  std::string csv = to_csv(two_runs());
  std::istringstream in(csv);
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_EQ(header.rfind("policy,clairvoyant,preemptive,gpus,jobs,preempt_cost,avg_jct,", 0), 0u);
  EXPECT_EQ(row1.rfind("fcfs,false,false,4,3,0,", 0), 0u);
  EXPECT_EQ(testing::count_of(header, ","), testing::count_of(row2, ","));
}

TEST(Report, TableShowsRatiosToTheBaseline) {
  auto rs = two_runs();
  std::string t = format_table(rs, 0);
  EXPECT_NE(t.find("(1.000)"), std::string::npos);
  EXPECT_NE(t.find("ratio to fcfs"), std::string::npos);
  EXPECT_NE(format_summary(rs[1]).find("avg JCT"), std::string::npos);
}

TEST(Report, SvgHasOneCurvePerPolicy) {
  std::string svg = to_svg(two_runs(), "a <title> & more");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(testing::count_of(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
  EXPECT_NE(svg.find(">sjf</text>"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace ember::sched
