// Topology, best-fit placement, placement validation and device ownership.
#include "scheduler/cluster.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace ember::sched {
namespace {

Job make_job(JobId id, int gpus, double mem = 0) {
  Job j;
  j.id = id;
  j.spec.name = std::string("j").append(std::to_string(id));
  j.spec.gpus = gpus;
  j.spec.mem_per_gpu = mem;
  return j;
}

TEST(Cluster, UniformTopology) {
  Topology t = Topology::uniform(20, 8);
  ASSERT_EQ(t.num_nodes(), 3);
  EXPECT_EQ(t.node(2).gpus, 4);
  EXPECT_EQ(t.first_device(2), 16);
  EXPECT_EQ(t.node_of(0), 0);
  EXPECT_EQ(t.node_of(15), 1);
  EXPECT_EQ(t.node_of(19), 2);
  EXPECT_EQ(t.min_nodes(8), 1);
  EXPECT_EQ(t.min_nodes(9), 2);
  EXPECT_EQ(t.min_nodes(16), 2);
  EXPECT_EQ(t.min_nodes(17), 3);
  EXPECT_EQ(t.min_nodes(21), -1);
  EXPECT_EQ(Topology::uniform(16, 0).num_nodes(), 1);
  EXPECT_EQ(Topology::uniform(16, 32).num_nodes(), 1);
}

TEST(Cluster, UnevenNodesAndMemory) {
  Topology t({{2, 16}, {4, 80}, {2, 16}});
  EXPECT_EQ(t.node_of(1), 0);
  EXPECT_EQ(t.node_of(2), 1);
  EXPECT_EQ(t.node_of(6), 2);
  EXPECT_EQ(t.min_nodes(4), 1);
  EXPECT_EQ(t.min_nodes(5), 2);
  EXPECT_EQ(t.min_nodes(2, 40), 1);
  EXPECT_EQ(t.min_nodes(5, 40), -1);  // only node 1 has 40 GiB devices
  FreeMap f(t);
  // 16 GiB is enough: best fit prefers a tight node, then the smaller memory.
  EXPECT_EQ(f.best_fit(2, 16), (Placement{{0, 2}}));
  EXPECT_EQ(f.best_fit(2, 40), (Placement{{1, 2}}));
  EXPECT_FALSE(f.best_fit(5, 40));
}

TEST(Cluster, BestFitPicksTheTightestNode) {
  Topology t = Topology::uniform(16, 4);
  FreeMap f(t);
  f.take({{0, 1}, {2, 3}});  // node 0: 3 free, node 2: 1 free
  EXPECT_EQ(f.best_fit(1), (Placement{{2, 1}}));
  EXPECT_EQ(f.best_fit(3), (Placement{{0, 3}}));
  EXPECT_EQ(f.best_fit(4), (Placement{{1, 4}}));
  // A gang of 8 needs two whole nodes; one of 6 takes a whole node plus the tightest home for 2.
  EXPECT_EQ(f.best_fit(8), (Placement{{1, 4}, {3, 4}}));
  EXPECT_EQ(f.best_fit(6), (Placement{{1, 4}, {0, 2}}));
  EXPECT_EQ(f.total_free(), 12);
  EXPECT_EQ(f.max_free(), 4);
  f.take({{1, 4}, {3, 4}});
  EXPECT_FALSE(f.best_fit(5));  // 4 devices free in total
  EXPECT_FALSE(f.best_fit(4));  // 3 + 1: no node has 4
  EXPECT_EQ(f.place_preferring(0, 1), (Placement{{0, 1}}));
  EXPECT_EQ(f.place_preferring(3, 1), (Placement{{2, 1}}));  // node 3 full: best fit
}

TEST(Cluster, PlacementProblems) {
  Topology t = Topology::uniform(8, 4, 16);
  FreeMap f(t);
  EXPECT_EQ(placement_problem(f, {{0, 2}}, 2, 0), "");
  EXPECT_NE(placement_problem(f, {{5, 2}}, 2, 0).find("node 5 does not exist"), std::string::npos);
  EXPECT_NE(placement_problem(f, {{0, 1}, {0, 1}}, 2, 0).find("appears twice"), std::string::npos);
  EXPECT_NE(placement_problem(f, {{0, 5}}, 5, 0).find("node 0 has 4 free devices, 5 asked"), std::string::npos);
  EXPECT_NE(placement_problem(f, {{0, 1}}, 2, 0).find("placement has 1 devices, the gang needs 2"), std::string::npos);
  EXPECT_NE(placement_problem(f, {{0, 1}, {1, 1}}, 2, 0).find("spans 2 nodes"), std::string::npos);
  EXPECT_NE(placement_problem(f, {{0, 1}}, 1, 32).find("16 GiB per device, 32 needed"), std::string::npos);
  EXPECT_NE(placement_problem(f, {{0, 0}}, 0, 0).find("has 0 devices"), std::string::npos);
}

TEST(Cluster, AllocateErrorsNameTheJob) {
  Cluster c(Topology::uniform(8, 4));
  Job a = make_job(0, 3), b = make_job(1, 2);
  a.devices = c.allocate(a, {{1, 3}});
  EXPECT_EQ(c.owner(5), 0);
  EXPECT_EQ(c.busy(), 3);
  try {
    c.allocate(b, {{1, 2}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot place job 'j1': node 1 has 1 free devices, 2 asked"),
              std::string::npos);
  }
  b.devices = c.allocate(b, {{0, 2}});
  EXPECT_EQ(b.devices, (std::vector<int>{0, 1}));
  c.release(a);
  EXPECT_EQ(c.owner(5), -1);
  EXPECT_EQ(c.free().free(1), 4);
  EXPECT_THROW(c.release(a), Error);  // released twice
  EXPECT_EQ(c.busy(), 2);
}

TEST(Cluster, BadTopology) {
  EXPECT_THROW(Topology::uniform(0, 8), Error);
  EXPECT_THROW(Topology(std::vector<NodeSpec>{}), Error);
  EXPECT_THROW(Topology({{0, 0}}), Error);
}

}  // namespace
}  // namespace ember::sched
