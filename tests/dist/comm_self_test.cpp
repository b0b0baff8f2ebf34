// SelfCommunicator, the world of one: collectives are the identity or a copy, complete at once,
// and what needs another rank is an error naming it. (It runs in every rank of the suite's mpirun
// job, each rank on its own.)
#include "dist/comm_self.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::dist;
using test_util::error_of;

namespace {

TEST(SelfComm, IsAWorldOfOne) {
  SelfCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.local_size(), 1);
  EXPECT_EQ(c.backend(), "self");
  EXPECT_EQ(c.device(), Device::cpu());
}

TEST(SelfComm, CollectivesAreTheIdentityOrACopyAndCompleteAtOnce) {
  SelfCommunicator c;
  Tensor t = from_vector(std::vector<float>{1, -2, 3.5f}, {3});
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    WorkPtr w = c.all_reduce(t, op, "grads");
    EXPECT_TRUE(w->completed());
    w->wait();
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, -2, 3.5f}));
  }
  c.broadcast(t, 0)->wait();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, -2, 3.5f}));
  Tensor gathered = zeros({3});
  c.all_gather(gathered, t)->wait();
  EXPECT_EQ(gathered.to_vector<float>(), t.to_vector<float>());
  Tensor scattered = zeros({3});
  c.reduce_scatter(scattered, t)->wait();
  EXPECT_EQ(scattered.to_vector<float>(), t.to_vector<float>());
  EXPECT_TRUE(c.barrier("end")->completed());
}

TEST(SelfComm, WhatNeedsAnotherRankIsAnError) {
  SelfCommunicator c;
  Tensor t = zeros({2});
  EXPECT_NE(error_of([&] { c.send(t, 1); }).find("rank 1 does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { c.recv(t, 0); }).find("this world has one rank"), std::string::npos);
  EXPECT_NE(error_of([&] { c.broadcast(t, 2); }).find("root 2 is not a rank"), std::string::npos);
  EXPECT_NE(error_of([&] { c.all_gather(zeros({4}), t); }).find("needs size() * input elements = 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.all_reduce(zeros({2}, {.dtype = DType::Int32}), ReduceOp::Avg); }).find("floating-point"),
            std::string::npos);
  EXPECT_NE(error_of([&] { c.reduce_scatter(t, t); }).find("must not share memory"), std::string::npos);
}

}  // namespace
