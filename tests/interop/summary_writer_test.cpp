// TensorBoard logs (interop/summary_writer.h, interop/tfrecord.h): the framing and its checksum,
// what each add_* writes, the file's name and exclusivity, flushing, and every failure. That
// TensorBoard's own reader takes the files is the interop.tensorboard test.
#include "interop/summary_writer.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/ops.h"
#include "data/image.h"
#include "interop/tfrecord.h"
#include "tensorboard_event.pb.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("ember_tb_" + std::to_string(::getpid()) + "_" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<tensorboard::Event> events_of(const std::string& file) {
  std::vector<tensorboard::Event> out;
  for (const std::string& r : tfrecord::read_records(file).records) {
    tensorboard::Event e;
    EXPECT_TRUE(e.ParseFromString(r));
    out.push_back(e);
  }
  return out;
}

void write_all_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST(TfRecord, Crc32cAndItsMaskAreTensorFlows) {
  EXPECT_EQ(tfrecord::crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(tfrecord::crc32c(""), 0u);
  const uint32_t c = tfrecord::crc32c("abc");
  EXPECT_EQ(tfrecord::masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  const std::string f = tfrecord::frame("hello");
  ASSERT_EQ(f.size(), 5u + 16u);
  EXPECT_EQ(f.substr(0, 8), std::string("\x05\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(f.substr(12, 5), "hello");
}

TEST(TfRecord, TruncatedFilesGiveTheirCompleteRecordsAndCorruptedOnesAreRefused) {
  TempDir d;
  fs::create_directories(d.path);
  const std::string path = (d.path / "r").string();
  const std::string whole = tfrecord::frame("one") + tfrecord::frame("two") + tfrecord::frame("three");
  write_all_bytes(path, whole);
  auto r = tfrecord::read_records(path);
  EXPECT_EQ(r.records, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_FALSE(r.truncated);
  write_all_bytes(path, whole.substr(0, whole.size() - 3));
  r = tfrecord::read_records(path);
  EXPECT_EQ(r.records, (std::vector<std::string>{"one", "two"}));
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.truncated_at, 38u);  // two records of 16 + 3 bytes
  std::string bad = whole;
  bad[19 + 12 + 1] ^= 0x20;  // a byte of "two"
  write_all_bytes(path, bad);
  try {
    tfrecord::read_records(path);
    FAIL() << "a corrupted record was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("record 1 at byte 19 has corrupted data"), std::string::npos) << e.what();
  }
  bad = whole;
  bad[19 + 2] = 0x7f;  // the length of "two"
  write_all_bytes(path, bad);
  EXPECT_THROW(tfrecord::read_records(path), Error);
  EXPECT_THROW(tfrecord::read_records((d.path / "missing").string()), Error);
}

TEST(SummaryWriter, WritesEachKindOfSummary) {
  TempDir d;
  std::string file;
  {
    SummaryWriter w(d.path.string());
    file = w.file();
    w.add_scalar("loss", 0.25, 7, 123.5);
    w.add_image("img", full({1, 3, 2}, 1.0), 8);
    w.add_histogram("h", from_vector(std::vector<double>{-1, 0, 0, 2.5}, {4}), 9);
    w.add_text("t", "hello", 10);
  }
  EXPECT_EQ(fs::path(file).parent_path(), d.path);
  EXPECT_EQ(fs::path(file).filename().string().rfind("events.out.tfevents.", 0), 0u);
  const auto ev = events_of(file);
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].file_version(), "brain.Event:2");
  ASSERT_EQ(ev[1].summary().value_size(), 1);
  EXPECT_EQ(ev[1].step(), 7);
  EXPECT_EQ(ev[1].wall_time(), 123.5);
  EXPECT_EQ(ev[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(ev[1].summary().value(0).simple_value(), 0.25f);
  const auto& img = ev[2].summary().value(0).image();
  EXPECT_EQ(img.height(), 3);
  EXPECT_EQ(img.width(), 2);
  EXPECT_EQ(img.colorspace(), 1);
  const Tensor px = data::decode_image(img.encoded_image_string(), 0, "img");
  EXPECT_EQ(px.shape(), (Shape{3, 2, 1}));
  EXPECT_EQ(px.to(DType::Float32).min().item(), 255.0);
  const auto& h = ev[3].summary().value(0).histo();
  EXPECT_EQ(h.num(), 4);
  EXPECT_EQ(h.min(), -1);
  EXPECT_EQ(h.max(), 2.5);
  EXPECT_EQ(h.sum(), 1.5);
  EXPECT_EQ(h.sum_squares(), 7.25);
  double total = 0;
  for (double b : h.bucket()) total += b;
  EXPECT_EQ(total, 4);
  // The two zeros share the bucket whose upper limit is 0.
  for (int i = 0; i < h.bucket_limit_size(); ++i) EXPECT_TRUE(h.bucket_limit(i) != 0 || h.bucket(i) == 2) << i;
  EXPECT_EQ(ev[4].summary().value(0).metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(ev[4].summary().value(0).tensor().string_val(0), "hello");
}

TEST(SummaryWriter, FlushMakesEverythingReadableAndTwoWritersNeverShareAFile) {
  TempDir d;
  SummaryWriter a(d.path.string(), {.flush_secs = 3600});
  SummaryWriter b(d.path.string(), {.flush_secs = 3600});
  EXPECT_NE(a.file(), b.file());
  for (int i = 0; i < 100; ++i) a.add_scalar("x", i, i);
  a.flush();
  EXPECT_EQ(events_of(a.file()).size(), 101u);  // with the file version first
  a.add_scalars("lr", {{"g", 1.0}, {"d/x", 2.0}}, 3);
  a.flush();
  EXPECT_TRUE(fs::exists(d.path / "lr_g"));
  EXPECT_TRUE(fs::exists(d.path / "lr_d_x"));
  a.close();
  EXPECT_THROW(a.add_scalar("x", 1, 1), Error);
  a.close();  // closing twice is harmless
}

TEST(SummaryWriter, BadInputsAndPathsAreErrors) {
  TempDir d;
  fs::create_directories(d.path);
  write_all_bytes((d.path / "a_file").string(), "x");
  EXPECT_THROW(SummaryWriter((d.path / "a_file").string()), Error);
  EXPECT_THROW(SummaryWriter(""), Error);
  EXPECT_THROW(SummaryWriter(d.path.string(), {.flush_secs = 0}), Error);
  SummaryWriter w((d.path / "logs").string());
  EXPECT_THROW(w.add_image("img", zeros({2, 4, 4}), 0), Error);                        // 2 channels
  EXPECT_THROW(w.add_image("img", zeros({4, 4}), 0), Error);                           // float without channels
  EXPECT_THROW(w.add_image("img", zeros({0, 4}, {.dtype = DType::UInt8}), 0), Error);  // empty
  w.add_histogram("h", full({3}, std::nan("")), 0);  // nothing finite: not written, said on stderr
  w.add_scalar("still", 1, 0);                       // the writer goes on after a refused call
  w.close();
  EXPECT_EQ(events_of(w.file()).size(), 2u);
}

TEST(SummaryWriter, AFailedWriteIsReportedNotDropped) {
  TempDir d;
  SummaryWriter w(d.path.string(), {.flush_secs = 3600});
  // Files of this process may not grow past 8 KiB: the next flush of a larger image fails (EFBIG).
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 8192;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  Tensor noise = rand({3, 64, 64});
  w.add_image("big", noise, 0);
  std::string message;
  try {
    w.flush();
  } catch (const Error& e) {
    message = e.what();
  }
  // A writer whose first record cannot be written fails in its constructor, its thread stopped
  // (a thread left running there would end the process).
  small.rlim_cur = 0;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string at_start;
  try {
    SummaryWriter never((d.path / "never").string());
  } catch (const Error& e) {
    at_start = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, SIG_DFL);
  EXPECT_NE(message.find("writing '" + w.file() + "' failed"), std::string::npos) << message;
  EXPECT_THROW(w.add_scalar("x", 1, 1), Error);
  EXPECT_THROW(w.close(), Error);
  EXPECT_NE(at_start.find("failed"), std::string::npos) << at_start;
}
