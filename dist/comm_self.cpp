#include "dist/comm_self.h"

#include "core/error.h"

namespace ember::dist {
namespace {

WorkPtr done(std::string what) {
  auto w = std::make_shared<Work>(std::move(what));
  w->mark_started();
  w->finish();
  return w;
}

}  // namespace

WorkPtr SelfCommunicator::all_reduce(Tensor t, ReduceOp op, std::string label) {
  check_tensor(t, "all_reduce", device_);
  check_reducible(t, op, "all_reduce");
  return done(describe("all_reduce", t, label, reduce_op_name(op)));  // sum, avg and max of one
}

WorkPtr SelfCommunicator::broadcast(Tensor t, int root, std::string label) {
  check_tensor(t, "broadcast", device_);
  EMBER_CHECK(root == 0, "broadcast: root ", root, " is not a rank of this world of one (rank 0)");
  return done(describe("broadcast", t, label));
}

WorkPtr SelfCommunicator::all_gather(Tensor out, Tensor in, std::string label) {
  check_tensor(out, "all_gather output", device_);
  check_tensor(in, "all_gather input", device_);
  EMBER_CHECK(out.dtype() == in.dtype(), "all_gather: output dtype ", dtype_name(out.dtype()),
              " differs from input dtype ", dtype_name(in.dtype()));
  EMBER_CHECK(out.numel() == in.numel(), "all_gather: the output needs size() * input elements = ", in.numel(),
              ", got ", out.numel());
  out.view(in.shape()).copy_(in);
  return done(describe("all_gather", in, label));
}

WorkPtr SelfCommunicator::reduce_scatter(Tensor out, Tensor in, ReduceOp op, std::string label) {
  check_tensor(out, "reduce_scatter output", device_);
  check_tensor(in, "reduce_scatter input", device_);
  check_reducible(in, op, "reduce_scatter");
  EMBER_CHECK(out.dtype() == in.dtype(), "reduce_scatter: output dtype ", dtype_name(out.dtype()),
              " differs from input dtype ", dtype_name(in.dtype()));
  EMBER_CHECK(in.numel() == out.numel(), "reduce_scatter: the input needs size() * output elements = ", out.numel(),
              ", got ", in.numel());
  EMBER_CHECK(!out.storage() || !in.storage() || out.storage() != in.storage(),
              "reduce_scatter: input and output must not share memory");
  out.copy_(in.view(out.shape()));
  return done(describe("reduce_scatter", in, label, reduce_op_name(op)));
}

WorkPtr SelfCommunicator::send(Tensor, int dst, int) {
  EMBER_FAIL("send: rank ", dst, " does not exist: this world has one rank (self)");
}

WorkPtr SelfCommunicator::recv(Tensor, int src, int) {
  EMBER_FAIL("recv: rank ", src, " does not exist: this world has one rank (self)");
}

WorkPtr SelfCommunicator::barrier(std::string label) {
  return done(describe("barrier", Tensor(), label));
}

std::unique_ptr<Communicator> SelfCommunicator::split(int color, int) {
  EMBER_CHECK(color >= 0, "split: expected a colour >= 0, got ", color);
  return std::make_unique<SelfCommunicator>(device_);
}

}  // namespace ember::dist
