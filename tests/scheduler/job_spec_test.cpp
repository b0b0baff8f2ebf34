// Job specs in text format, the daemon's message framing and its SQLite store, without a daemon.
#include "scheduler/daemon/job_spec.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "scheduler/daemon/pool.h"
#include "scheduler/daemon/store.h"
#include "scheduler/daemon/wire.h"

namespace ember::sched {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JobSpec, ParsesEveryField) {
  proto::JobSpec s = parse_job_spec(R"(
    name: "mnist" command: "./train" args: ["--epochs", "2"] devices: 2 memory_gib: 4.5
    expected_seconds: 600 priority: 3 queue: "vision" checkpoint_dir: "ckpt" max_restarts: 1
    env { key: "A" value: "1" } workdir: "/tmp")",
                                    "t");
  EXPECT_EQ(s.name(), "mnist");
  EXPECT_EQ(s.args_size(), 2);
  EXPECT_EQ(spec_devices(s), 2);
  EXPECT_EQ(s.env().at("A"), "1");
  JobSpec j = to_sched_spec(s, 100);
  EXPECT_EQ(j.gpus, 2);
  EXPECT_DOUBLE_EQ(j.mem_per_gpu, 4.5);
  EXPECT_DOUBLE_EQ(j.estimate, 600);
  EXPECT_LT(j.duration, 0) << "a live job's duration is unknown";
  EXPECT_DOUBLE_EQ(j.submit, 100);
  EXPECT_EQ(j.priority, 3);
  EXPECT_EQ(j.queue, "vision");
}

TEST(JobSpec, DefaultsWhenFieldsAreLeftOut) {
  proto::JobSpec s = parse_job_spec("command: \"true\"", "t");
  EXPECT_EQ(spec_devices(s), 1);
  EXPECT_LT(to_sched_spec(s, 0).estimate, 0) << "no estimate given";
}

TEST(JobSpec, ErrorsNameTheProblem) {
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\"\nnmae: \"y\"", "f.pbtxt"); }).find("f.pbtxt:2:"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\"\nnmae: \"y\"", "f.pbtxt"); }).find("nmae"), std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("devices: \"two\" command: \"x\"", "f"); }).find("f:1:"), std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("name: \"a\"", "f"); }).find("no command"), std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" devices: 0", "f"); }).find("devices must be"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" devices: -3", "f"); }).find("got -3"), std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" memory_gib: -1", "f"); }).find("memory_gib must be"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" expected_seconds: 0", "f"); }).find("expected_seconds"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" max_restarts: -1", "f"); }).find("max_restarts"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" env { key: \"A=B\" value: \"1\" }", "f"); }).find("'A=B'"),
            std::string::npos);
  EXPECT_NE(error_of([] { read_job_spec("/nonexistent/spec.pbtxt"); }).find("cannot open"), std::string::npos);
  EXPECT_NE(error_of([] { read_job_spec("/tmp"); }).find("is a folder"), std::string::npos);
  // exec() would run "/bin/true" for "/bin/true\0x": a NUL byte is refused wherever it hides.
  EXPECT_NE(error_of([] { parse_job_spec("command: \"/bin/true\\000x\"", "f"); }).find("command contains a NUL"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_job_spec("command: \"x\" args: \"a\" args: \"b\\000\"", "f"); }).find("argument 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_job_spec("command: \"x\" checkpoint_dir: \"/dev/null\"", "f");
            }).find("checkpoint_dir '/dev/null' exists and is not a folder"),
            std::string::npos);
}

TEST(Wire, FramesRoundTripAndOversizeIsRefused) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  proto::Request req;
  req.mutable_cancel()->set_job(42);
  std::string out;
  ASSERT_TRUE(req.SerializeToString(&out));
  write_frame(sv[0], out, 5);
  proto::Request back;
  ASSERT_TRUE(back.ParseFromString(read_frame(sv[1], 5)));
  EXPECT_EQ(back.cancel().job(), 42);
  // A length beyond the limit is refused before anything is allocated.
  unsigned char huge[4] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_EQ(::write(sv[0], huge, 4), 4);
  EXPECT_NE(error_of([&] { read_frame(sv[1], 5); }).find("more than the limit"), std::string::npos);
  // A peer that closes mid-message is an error, not a hang.
  unsigned char partial[6] = {10, 0, 0, 0, 1, 2};
  ASSERT_EQ(::write(sv[0], partial, 6), 6);
  ::close(sv[0]);
  EXPECT_NE(error_of([&] { read_frame(sv[1], 5); }).find("closed the connection"), std::string::npos);
  ::close(sv[1]);
}

TEST(Wire, ReadTimesOut) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_NE(error_of([&] { read_frame(sv[1], 0.05); }).find("timed out"), std::string::npos);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(Wire, NoDaemonIsAClearError) {
  proto::Request req;
  req.mutable_status();
  std::string e = error_of([&] { call_daemon("/nonexistent-state", req, 1); });
  EXPECT_NE(e.find("no daemon answers at /nonexistent-state/sched.sock"), std::string::npos) << e;
}

// A daemon that accepts connections but never answers (hung, or stopped with SIGSTOP) is named
// as unresponsive, not reported as a socket timeout.
TEST(Wire, ADaemonThatNeverAnswersIsCalledUnresponsive) {
  char tmpl[] = "/tmp/ember-wire-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  int fd = listen_unix(socket_path(dir));  // the kernel completes connections nobody accepts
  proto::Request req;
  req.mutable_status();
  std::string e = error_of([&] { call_daemon(dir, req, 0.2); });
  EXPECT_NE(e.find("accepted the connection but did not answer"), std::string::npos) << e;
  EXPECT_NE(e.find("unresponsive"), std::string::npos) << e;
  ::close(fd);
  std::filesystem::remove_all(dir);
}

TEST(Store, PersistsRecordsAndEvents) {
  char tmpl[] = "/tmp/ember-store-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string db = std::string(tmpl) + "/state.db";
  {
    Store s(db);
    JobRecord r;
    r.info.mutable_spec()->set_command("true");
    r.info.set_state(proto::QUEUED);
    s.insert(r, "submitted");
    EXPECT_EQ(r.info.id(), 1);
    r.info.set_state(proto::RUNNING);
    r.info.set_pid(1234);
    r.pid_start = 99;
    r.job.executed = 2.5;
    r.stop = StopKind::kPreempt;
    s.save(r, "started");
    JobRecord r2;
    r2.info.mutable_spec()->set_command("false");
    s.insert(r2, "submitted");
    EXPECT_EQ(r2.info.id(), 2);
  }
  Store s(db);  // as a restarted daemon sees it
  std::vector<JobRecord> all = s.load_all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].info.state(), proto::RUNNING);
  EXPECT_EQ(all[0].info.pid(), 1234);
  EXPECT_EQ(all[0].pid_start, 99u);
  EXPECT_DOUBLE_EQ(all[0].job.executed, 2.5);
  EXPECT_EQ(all[0].stop, StopKind::kPreempt);
  EXPECT_EQ(all[1].info.spec().command(), "false");
  std::vector<std::string> ev = s.events(1);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_NE(ev[0].find("queued submitted"), std::string::npos) << ev[0];
  EXPECT_NE(ev[1].find("running started"), std::string::npos) << ev[1];
  std::filesystem::remove_all(tmpl);
}

TEST(Pool, CpuDevicesAndTheirErrors) {
  Pool p = make_pool("cpu:3x2", 8);
  ASSERT_EQ(p.devices.size(), 3u);
  EXPECT_TRUE(p.cpu());
  EXPECT_EQ(p.devices[2].name, "cpu2");
  EXPECT_EQ(p.devices[1].cores.size(), 2u);
  EXPECT_EQ(p.topology().num_devices(), 3);
  EXPECT_EQ(p.topology().min_nodes(2, 8), 1);
  EXPECT_EQ(p.topology().min_nodes(1, 9), -1) << "more memory than a device has";
  EXPECT_NE(error_of([] { make_pool("cpu:0"); }).find("between 1 and 4096"), std::string::npos);
  EXPECT_NE(error_of([] { make_pool("cpu:2xq"); }).find("got 'q'"), std::string::npos);
  EXPECT_NE(error_of([] { make_pool("tpu:4"); }).find("expected auto, gpu"), std::string::npos);
  if (query_gpus().empty()) {
    EXPECT_NE(error_of([] { make_pool("gpu"); }).find("lists no GPU"), std::string::npos);
  }
}

// The GPU path without a GPU: a stand-in nvidia-smi on the PATH answers the query the daemon makes.
TEST(Pool, GpusFromNvidiaSmiGroupedByMemory) {
  char tmpl[] = "/tmp/ember-smi-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  {
    std::ofstream f(dir + "/nvidia-smi");
    f << "#!/bin/sh\necho '0, 81559'\necho '1, 40960'\necho '2, 81559'\n";
  }
  std::filesystem::permissions(dir + "/nvidia-smi", std::filesystem::perms::owner_all);
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  ::setenv("PATH", (dir + ":" + saved).c_str(), 1);
  auto gpus = query_gpus();
  Pool all = make_pool("gpu");
  Pool some = make_pool("gpu:2,1");
  Pool autop = make_pool("auto");
  std::string bad = error_of([] { make_pool("gpu:5"); });
  std::string twice = error_of([] { make_pool("gpu:1,1"); });
  ::setenv("PATH", saved.c_str(), 1);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_NEAR(gpus[0].memory_gib, 81559 / 1024.0, 1e-9);
  EXPECT_EQ(gpus[0].type, "") << "no name column";
  EXPECT_FALSE(all.typed());
  ASSERT_EQ(all.devices.size(), 3u);
  EXPECT_FALSE(all.cpu());
  // The two 80 GiB GPUs first (one node), then the 40 GiB one (another node).
  EXPECT_EQ(all.devices[0].cuda_index, 0);
  EXPECT_EQ(all.devices[1].cuda_index, 2);
  EXPECT_EQ(all.devices[2].cuda_index, 1);
  Topology t = all.topology();
  EXPECT_EQ(t.num_nodes(), 2);
  EXPECT_EQ(t.min_nodes(2, 60), 1) << "two 80 GiB devices";
  EXPECT_EQ(t.min_nodes(3, 60), -1) << "only two devices have 60 GiB";
  EXPECT_EQ(t.min_nodes(3, 0), 2);
  ASSERT_EQ(some.devices.size(), 2u);
  EXPECT_EQ(some.devices[0].name, "gpu2");
  EXPECT_EQ(autop.devices.size(), 3u) << "auto takes the GPUs when there are some";
  EXPECT_NE(bad.find("there is no GPU 5"), std::string::npos) << bad;
  EXPECT_NE(twice.find("GPU 1 listed twice"), std::string::npos) << twice;
}

TEST(Pool, GpuTypesComeFromNvidiaSmiNames) {
  EXPECT_EQ(gpu_type("NVIDIA H200"), "h200");
  EXPECT_EQ(gpu_type(" Tesla V100-SXM2-32GB\n"), "v100");
  EXPECT_EQ(gpu_type("NVIDIA A100-SXM4-80GB"), "a100");
  EXPECT_EQ(gpu_type("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(gpu_type("NVIDIA GeForce RTX 4090"), "rtx4090");
  EXPECT_EQ(gpu_type("NVIDIA L40S"), "l40s");
  EXPECT_EQ(gpu_type(""), "");
  EXPECT_EQ(gpu_type("Unknown GPU"), "");

  char tmpl[] = "/tmp/ember-smi-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto with_smi = [&](const std::string& lines, const std::string& spec) {
    {
      std::ofstream f(dir + "/nvidia-smi");
      f << "#!/bin/sh\ncat <<'END'\n" << lines << "END\n";
    }
    std::filesystem::permissions(dir + "/nvidia-smi", std::filesystem::perms::owner_all);
    const char* old = std::getenv("PATH");
    const std::string saved = old ? old : "";
    ::setenv("PATH", (dir + ":" + saved).c_str(), 1);
    Pool p = make_pool(spec);
    ::setenv("PATH", saved.c_str(), 1);
    return p;
  };
  // Two kinds: typed, each kind its own nodes, the kinds in the order nvidia-smi first lists them.
  Pool mixed = with_smi(
      "0, 32768, Tesla V100-SXM2-32GB\n1, 143771, NVIDIA H200\n2, 32768, Tesla V100-SXM2-32GB\n3, 143771, NVIDIA "
      "H200\n",
      "gpu");
  ASSERT_EQ(mixed.devices.size(), 4u);
  EXPECT_TRUE(mixed.typed());
  EXPECT_EQ(mixed.devices[0].type, "v100");
  EXPECT_EQ(mixed.devices[1].cuda_index, 2);
  EXPECT_EQ(mixed.devices[2].type, "h200");
  EXPECT_EQ(mixed.devices[3].cuda_index, 3);
  Topology t = mixed.topology();
  EXPECT_EQ(t.num_nodes(), 2);
  EXPECT_NE(mixed.describe().find("gpu1 (h200, "), std::string::npos) << mixed.describe();
  // The chosen GPUs decide: one kind among them is untyped.
  Pool one_kind =
      with_smi("0, 32768, Tesla V100-SXM2-32GB\n1, 143771, NVIDIA H200\n2, 32768, Tesla V100-SXM2-32GB\n", "gpu:0,2");
  EXPECT_FALSE(one_kind.typed());
  // One kind: untyped, as before types were read.
  Pool same = with_smi("0, 81559, NVIDIA H100 80GB HBM3\n1, 81559, NVIDIA H100 80GB HBM3\n", "auto");
  EXPECT_FALSE(same.typed());
  EXPECT_EQ(same.devices.size(), 2u);
  // A GPU without a name among named ones: untyped rather than a type "".
  Pool part = with_smi("0, 81559, NVIDIA H100 80GB HBM3\n1, 81559\n", "gpu");
  EXPECT_FALSE(part.typed());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ember::sched
