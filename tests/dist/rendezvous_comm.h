// NCCL's point-to-point semantics on CPU ranks, for the tests: CI has no GPU, and a machine with
// one GPU cannot run two NCCL ranks either, so code that will send through NCCL is proven here
// against what makes NCCL differ from MPI.
//   - Transfers are matched by order, not by tag: every tag given is ignored.
//   - A send completes only when the peer has posted the matching receive (NCCL has no eager
//     buffer to leave a message in), and a receive only when the send arrived.
//   - A rank's transfers and collectives run one after another, in the order issued (they share
//     one communication stream).
// Each operation therefore runs to completion before the call returns, which is exactly as strict
// as one stream: a cycle of transfers that NCCL would leave hanging on its stream hangs here too,
// and is reported after `deadline` as an ember::Error naming the transfer, instead of hanging.
// The rendezvous is an acknowledgement: the receiver answers every message with a one-byte one.
#pragma once

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "dist/comm.h"

namespace dist_test {

class RendezvousCommunicator final : public ember::dist::Communicator {
 public:
  // The tags of the inner communicator's messages and acknowledgements.
  static constexpr int kDataTag = 2900, kAckTag = 2901;

  explicit RendezvousCommunicator(ember::dist::Communicator& inner,
                                  std::chrono::milliseconds deadline = std::chrono::seconds(20))
      : inner_(inner), deadline_(deadline) {}
  // Over a communicator of its own (a split's group).
  RendezvousCommunicator(std::unique_ptr<ember::dist::Communicator> owned, std::chrono::milliseconds deadline)
      : owned_(std::move(owned)), inner_(*owned_), deadline_(deadline) {}

  // ncclCommSplit: each group's communicator keeps NCCL's point-to-point rules.
  std::unique_ptr<ember::dist::Communicator> split(int color, int key) override {
    return std::make_unique<RendezvousCommunicator>(inner_.split(color, key), deadline_);
  }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  int local_rank() const override { return inner_.local_rank(); }
  int local_size() const override { return inner_.local_size(); }
  std::string backend() const override { return "rendezvous(" + inner_.backend() + ")"; }

  ember::dist::WorkPtr all_reduce(ember::Tensor t, ember::dist::ReduceOp op, std::string label) override {
    return finish(inner_.all_reduce(std::move(t), op, std::move(label)));
  }
  ember::dist::WorkPtr broadcast(ember::Tensor t, int root, std::string label) override {
    return finish(inner_.broadcast(std::move(t), root, std::move(label)));
  }
  ember::dist::WorkPtr all_gather(ember::Tensor out, ember::Tensor in, std::string label) override {
    return finish(inner_.all_gather(std::move(out), std::move(in), std::move(label)));
  }
  ember::dist::WorkPtr reduce_scatter(ember::Tensor out, ember::Tensor in, ember::dist::ReduceOp op,
                                      std::string label) override {
    return finish(inner_.reduce_scatter(std::move(out), std::move(in), op, std::move(label)));
  }
  ember::dist::WorkPtr barrier(std::string label) override { return finish(inner_.barrier(std::move(label))); }

  ember::dist::WorkPtr send(ember::Tensor t, int dst, int) override {
    const std::string what = ember::dist::describe("send", t, "to rank " + std::to_string(dst));
    auto sent = inner_.send(t, dst, kDataTag);
    ember::Tensor ack = ember::empty({1}, {.dtype = ember::DType::UInt8});
    await(inner_.recv(ack, dst, kAckTag), what + ": the receiver never posted its receive");
    await(sent, what);
    return done(what);
  }
  ember::dist::WorkPtr recv(ember::Tensor t, int src, int) override {
    const std::string what = ember::dist::describe("recv", t, "from rank " + std::to_string(src));
    await(inner_.recv(t, src, kDataTag), what + ": the sender never sent");
    ember::Tensor ack = ember::zeros({1}, {.dtype = ember::DType::UInt8});
    await(inner_.send(ack, src, kAckTag), what);
    return done(what);
  }
  // A group (ncclGroupStart/End): every transfer is posted before any is waited for, so two ranks
  // sending to each other inside their groups both complete; the group returns when all have.
  ember::dist::WorkPtr exchange(std::vector<ember::dist::P2POp> ops, std::string label) override {
    using ember::dist::P2POp;
    ember::dist::check_exchange(ops, rank(), size(), device());
    const std::string what = ember::dist::describe_group(ops, label);
    std::vector<ember::dist::WorkPtr> data, acks;
    std::vector<ember::Tensor> ack_bufs;
    for (const P2POp& op : ops) {
      ack_bufs.push_back(ember::zeros({1}, {.dtype = ember::DType::UInt8}));
      if (op.kind == P2POp::Send) {
        data.push_back(inner_.send(op.t, op.peer, kDataTag));
        acks.push_back(inner_.recv(ack_bufs.back(), op.peer, kAckTag));
      } else {
        data.push_back(inner_.recv(op.t, op.peer, kDataTag));
        acks.push_back(nullptr);
      }
    }
    for (size_t j = 0; j < ops.size(); ++j) {
      if (ops[j].kind == P2POp::Send) continue;
      await(data[j], what + ": the sender never sent");
      acks[j] = inner_.send(ack_bufs[j], ops[j].peer, kAckTag);
    }
    for (size_t j = 0; j < ops.size(); ++j) {
      await(acks[j], what + (ops[j].kind == P2POp::Send ? ": the receiver never posted its receive" : ""));
      if (ops[j].kind == P2POp::Send) await(data[j], what);
    }
    return done(what);
  }

 private:
  void await(const ember::dist::WorkPtr& w, const std::string& what) const {
    const auto until = std::chrono::steady_clock::now() + deadline_;
    while (!w->completed()) {
      EMBER_CHECK(std::chrono::steady_clock::now() < until, "rank ", rank(), ": deadlock under NCCL's ordering: ", what,
                  " (nothing matched it within ", deadline_.count(), " ms)");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    w->wait();
  }
  ember::dist::WorkPtr finish(const ember::dist::WorkPtr& w) const {
    await(w, w->what());
    return w;
  }
  static ember::dist::WorkPtr done(std::string what) {
    auto w = std::make_shared<ember::dist::Work>(std::move(what));
    w->mark_started();
    w->finish();
    return w;
  }

  std::unique_ptr<ember::dist::Communicator> owned_;  // a split's group; empty otherwise
  ember::dist::Communicator& inner_;
  std::chrono::milliseconds deadline_;
};

}  // namespace dist_test
