// IDX / MNIST parsing: good files plain and gzipped, and every kind of bad file.
#include "data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/ops.h"
#include "data/mnist.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;
using namespace ember::data;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() / ("ember_idx_" + std::to_string(::getpid()) + "_" + std::to_string(rand_counter++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static inline int rand_counter = 0;
};

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    s.push_back(static_cast<char>(d >> 24));
    s.push_back(static_cast<char>(d >> 16));
    s.push_back(static_cast<char>(d >> 8));
    s.push_back(static_cast<char>(d));
  }
  return s + payload;
}

void write(const fs::path& p, const std::string& bytes, bool gz = false) {
  if (gz) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary) << bytes;
  }
}

// A tiny MNIST-shaped set: n images of 2x3 pixels with value i*10+j, labels i%10.
void write_mnist(const fs::path& dir, int n, bool gz, int labels_n = -1) {
  for (const char* prefix : {"train", "t10k"}) {
    std::string img, lab;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 6; ++j) img.push_back(static_cast<char>(i * 10 + j));
    }
    for (int i = 0; i < (labels_n < 0 ? n : labels_n); ++i) lab.push_back(static_cast<char>(i % 10));
    std::string ext = gz ? ".gz" : "";
    write(dir / (std::string(prefix) + "-images-idx3-ubyte" + ext), idx_bytes(8, {uint32_t(n), 2, 3}, img), gz);
    write(dir / (std::string(prefix) + "-labels-idx1-ubyte" + ext),
          idx_bytes(8, {uint32_t(labels_n < 0 ? n : labels_n)}, lab), gz);
  }
}

}  // namespace

TEST(Idx, ReadsPlainAndGzip) {
  TempDir d;
  std::string payload = {1, 2, 3, 4, 5, 6};
  write(d.path / "a", idx_bytes(8, {2, 3}, payload));
  write(d.path / "b.gz", idx_bytes(8, {2, 3}, payload), true);
  for (const char* name : {"a", "b.gz"}) {
    Tensor t = read_idx((d.path / name).string());
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    EXPECT_EQ(t.dtype(), DType::UInt8);
    EXPECT_EQ(t.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(Idx, ReadsBigEndianIntsAndFloats) {
  TempDir d;
  std::string payload = {
      0, 0, 1, 2, static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xff), static_cast<char>(0xfe)};
  write(d.path / "i", idx_bytes(0x0C, {2}, payload));
  EXPECT_EQ(read_idx((d.path / "i").string()).to_vector<int32_t>(), (std::vector<int32_t>{258, -2}));
  std::string f = {0x3f, static_cast<char>(0x80), 0, 0};  // 1.0f
  write(d.path / "f", idx_bytes(0x0D, {1}, f));
  EXPECT_EQ(read_idx((d.path / "f").string()).to_vector<float>(), (std::vector<float>{1.0f}));
}

TEST(Idx, BadFilesGiveClearErrors) {
  TempDir d;
  write(d.path / "trunc", idx_bytes(8, {2, 3}, "\x01\x02"));
  EXPECT_NE(error_of([&] { read_idx((d.path / "trunc").string()); }).find("truncated"), std::string::npos);
  write(d.path / "trunc.gz", idx_bytes(8, {2, 3}, "\x01\x02"), true);
  EXPECT_NE(error_of([&] { read_idx((d.path / "trunc.gz").string()); }).find("truncated"), std::string::npos);
  write(d.path / "magic", "\x12\x34\x08\x01\x00\x00\x00\x01\x05");
  EXPECT_NE(error_of([&] { read_idx((d.path / "magic").string()); }).find("not an IDX file"), std::string::npos);
  write(d.path / "type", idx_bytes(0x07, {1}, "\x01"));
  EXPECT_NE(error_of([&] { read_idx((d.path / "type").string()); }).find("element type"), std::string::npos);
  write(d.path / "extra", idx_bytes(8, {1}, "\x01\x02"));
  EXPECT_NE(error_of([&] { read_idx((d.path / "extra").string()); }).find("trailing"), std::string::npos);
  EXPECT_NE(error_of([&] { read_idx((d.path / "missing").string()); }).find("cannot open"), std::string::npos);
  write(d.path / "tiny", "\x00");
  EXPECT_NE(error_of([&] { read_idx((d.path / "tiny").string()); }).find("too short"), std::string::npos);
  // A gzip file cut in the middle of its compressed stream.
  write(d.path / "cut.gz", idx_bytes(8, {100, 100}, std::string(10000, 'x')), true);
  std::string whole;
  {
    std::ifstream in(d.path / "cut.gz", std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  write(d.path / "cut.gz", whole.substr(0, whole.size() / 2));
  EXPECT_FALSE(error_of([&] { read_idx((d.path / "cut.gz").string()); }).empty());
}

TEST(Mnist, LoadsAllFourFilesPlainOrGz) {
  for (bool gz : {false, true}) {
    TempDir d;
    write_mnist(d.path, 5, gz);
    EXPECT_TRUE(MNIST::available(d.path.string()));
    MNIST train(d.path.string(), Split::Train);
    EXPECT_EQ(train.size(), 5);
    Generator g;
    Example e = train.get(3, g);
    EXPECT_EQ(e.input.shape(), (Shape{1, 2, 3}));
    EXPECT_FLOAT_EQ(e.input.to_vector<float>()[1], 31.0f / 255.0f);
    EXPECT_EQ(e.target.item<int64_t>(), 3);
    Example b = train.get_batch({4, 0}, {&g, &g});
    EXPECT_EQ(b.input.shape(), (Shape{2, 1, 2, 3}));
    EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{4, 0}));
    MNIST norm(d.path.string(), Split::Test, {.normalize = std::make_pair(0.5, 0.25)});
    EXPECT_FLOAT_EQ(norm.get(0, g).input.to_vector<float>()[0], (0.0f - 0.5f) / 0.25f);
  }
}

TEST(Mnist, MissingOrInconsistentFiles) {
  TempDir d;
  EXPECT_NE(error_of([&] { MNIST((d.path / "nope").string(), Split::Train); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] { MNIST(d.path.string(), Split::Train); }).find("train-images-idx3-ubyte"), std::string::npos);
  write_mnist(d.path, 5, false, 4);
  EXPECT_NE(error_of([&] { MNIST(d.path.string(), Split::Train); }).find("labels"), std::string::npos);
  TempDir d2;
  write_mnist(d2.path, 3, false);
  write(d2.path / "train-labels-idx1-ubyte", idx_bytes(8, {3}, "\x01\x0b\x02"));
  EXPECT_NE(error_of([&] { MNIST(d2.path.string(), Split::Train); }).find("label 11"), std::string::npos);
}

TEST(Mnist, FashionMnistFromDebianIfInstalled) {
  const std::string root = "/usr/share/datasets/fashion-mnist";
  if (!MNIST::available(root)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  MNIST test(root, Split::Test);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.images().shape(), (Shape{10000, 28, 28}));
}
