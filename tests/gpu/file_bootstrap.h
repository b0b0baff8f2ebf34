// Ranks started by a script rather than by MPI, for the GPU check: the device image has no
// OpenMPI, yet two NCCL ranks on its one GPU need NCCL's unique id passed from rank 0 to the other.
// Each rank gets EMBER_TEST_RANK and EMBER_TEST_WORLD_SIZE, and all share a folder,
// EMBER_TEST_RENDEZVOUS: broadcast() writes root's bytes there (a file renamed into place, so a
// reader never sees half of it) and the others read them. All ranks are on one node. Only what
// NcclCommunicator's bootstrap needs is here; everything else is refused.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "dist/comm.h"

namespace gpu_test {

class FileBootstrap final : public ember::dist::Communicator {
 public:
  // Whether this process was started as one of such ranks.
  static bool requested() { return std::getenv("EMBER_TEST_RENDEZVOUS") != nullptr; }

  FileBootstrap() : dir_(env("EMBER_TEST_RENDEZVOUS")) {
    rank_ = number("EMBER_TEST_RANK");
    size_ = number("EMBER_TEST_WORLD_SIZE");
    EMBER_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_, "EMBER_TEST_RANK=", rank_, " must be in [0, ",
                "EMBER_TEST_WORLD_SIZE=", size_, ")");
    EMBER_CHECK(std::filesystem::is_directory(dir_), "EMBER_TEST_RENDEZVOUS: ", dir_, " is not a folder");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return rank_; }
  int local_size() const override { return size_; }
  std::string backend() const override { return "file"; }

  ember::dist::WorkPtr broadcast(ember::Tensor t, int root, std::string label) override {
    ember::dist::check_tensor(t, "broadcast", ember::Device::cpu());
    const std::string path = dir_ + "/broadcast-" + std::to_string(seq_++);
    const auto bytes = static_cast<std::streamsize>(t.numel() * t.itemsize());
    if (rank_ == root) {
      const std::string tmp = path + ".tmp";
      std::ofstream(tmp, std::ios::binary).write(static_cast<const char*>(t.raw_data()), bytes);
      std::filesystem::rename(tmp, path);
    } else {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!std::filesystem::exists(path)) {
        EMBER_CHECK(std::chrono::steady_clock::now() < until, "rank ", rank_, ": broadcast '", label, "': rank ", root,
                    " wrote nothing to ", path, " within 60 s");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::ifstream in(path, std::ios::binary);
      in.read(static_cast<char*>(t.raw_data()), bytes);
      EMBER_CHECK(in.gcount() == bytes, "broadcast '", label, "': ", path, " holds ", in.gcount(), " bytes, expected ",
                  bytes);
    }
    return done("broadcast " + label);
  }
  ember::dist::WorkPtr all_reduce(ember::Tensor, ember::dist::ReduceOp, std::string) override { refuse(); }
  ember::dist::WorkPtr all_gather(ember::Tensor, ember::Tensor, std::string) override { refuse(); }
  ember::dist::WorkPtr reduce_scatter(ember::Tensor, ember::Tensor, ember::dist::ReduceOp, std::string) override {
    refuse();
  }
  ember::dist::WorkPtr send(ember::Tensor, int, int) override { refuse(); }
  ember::dist::WorkPtr recv(ember::Tensor, int, int) override { refuse(); }
  ember::dist::WorkPtr barrier(std::string) override { refuse(); }

 private:
  [[noreturn]] static void refuse() {
    EMBER_FAIL("FileBootstrap: only broadcast (NCCL's unique id); use the NCCL communicator for the rest");
  }
  static std::string env(const char* name) {
    const char* v = std::getenv(name);
    EMBER_CHECK(v && *v, name, " is not set (FileBootstrap needs EMBER_TEST_RENDEZVOUS, EMBER_TEST_RANK and ",
                "EMBER_TEST_WORLD_SIZE)");
    return v;
  }
  static int number(const char* name) {
    const std::string v = env(name);
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    EMBER_CHECK(*end == '\0' && n >= 0 && n < 1024, name, ": expected a whole number, got '", v, "'");
    return static_cast<int>(n);
  }
  static ember::dist::WorkPtr done(std::string what) {
    auto w = std::make_shared<ember::dist::Work>(std::move(what));
    w->mark_started();
    w->finish();
    return w;
  }
  std::string dir_;
  int rank_ = 0, size_ = 1, seq_ = 0;
};

}  // namespace gpu_test
