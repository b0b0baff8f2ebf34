// ImageFolder: class discovery, decoding and resizing, corrupt files (error or skip), and
// augmented batches that do not depend on the number of loader workers.
#include "data/image_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/ops.h"
#include "data/dataloader.h"
#include "data/image.h"
#include "data/transforms.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::data;
using test_util::expect_error;
namespace fs = std::filesystem;

namespace {

// root/ant/{a0.png, a1.png}, root/bee/{b0.png, notes.txt, .hidden.png}, root/cow/c0.PNG: images
// of different sizes whose pixels hold a per-image constant (10, 20, ... per file).
struct Tree {
  fs::path root;
  Tree() {
    root = fs::temp_directory_path() / ("ember_imagefolder_" + std::to_string(::getpid()));
    fs::remove_all(root);
    for (const char* c : {"ant", "bee", "cow", ".git"}) fs::create_directories(root / c);
    put("ant/a0.png", 4, 6, 10);
    put("ant/a1.png", 8, 8, 20);
    put("bee/b0.png", 3, 5, 30);
    put("bee/.hidden.png", 3, 3, 40);
    put("cow/c0.PNG", 9, 7, 50);
    std::ofstream(root / "bee" / "notes.txt") << "not an image";
  }
  ~Tree() { fs::remove_all(root); }
  void put(const std::string& rel, int64_t h, int64_t w, int value) {
    write_png((root / rel).string(), full({h, w, 3}, value, {.dtype = DType::UInt8}));
  }
};

}  // namespace

TEST(ImageFolder, FindsClassesAndImagesInSortedOrder) {
  Tree t;
  ImageFolder ds(t.root.string(), {.height = 5, .width = 4});
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"ant", "bee", "cow"}));
  ASSERT_EQ(ds.size(), 4);
  std::vector<int64_t> labels;
  for (auto& [path, label] : ds.samples()) labels.push_back(label);
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 0, 1, 2}));
  EXPECT_EQ(fs::path(ds.samples()[3].first).filename(), "c0.PNG");  // extensions compare without case
  Generator g(1);
  for (int64_t i = 0; i < ds.size(); ++i) {
    Example e = ds.get(i, g);
    EXPECT_EQ(e.input.shape(), (Shape{3, 5, 4}));
    EXPECT_EQ(e.target.item<int64_t>(), labels[static_cast<size_t>(i)]);
    const float want = static_cast<float>((i == 0 ? 10 : i == 1 ? 20 : i == 2 ? 30 : 50) / 255.0);
    EXPECT_NEAR(min(e.input).item(), want, 1e-6);  // resizing a constant image keeps it constant
    EXPECT_NEAR(max(e.input).item(), want, 1e-6);
  }
  ImageFolder grey(t.root.string(), {.height = 2, .width = 2, .channels = 1});
  EXPECT_EQ(grey.get(0, g).input.shape(), (Shape{1, 2, 2}));
  // A batch through the loader: [N, C, H, W] and [N].
  DataLoader dl(ds, {.batch_size = 4, .shuffle = false});
  for (auto& [x, y] : dl) {
    EXPECT_EQ(x.shape(), (Shape{4, 3, 5, 4}));
    EXPECT_EQ(y.to_vector<int64_t>(), labels);
  }
}

// A test set is labelled by the training set's classes: one with fewer classes keeps their
// training labels (numbered by its own subfolders, {bee, cow} once read as labels 0 and 1), and a
// class the training set lacks is refused, naming both lists.
TEST(ImageFolder, GivenClassesLabelATestSetAsItsTrainingSet) {
  Tree t;
  fs::remove_all(t.root / "ant");
  ImageFolder test(t.root.string(), {.height = 2, .width = 2, .classes = {"ant", "bee", "cow"}});
  EXPECT_EQ(test.classes(), (std::vector<std::string>{"ant", "bee", "cow"}));
  std::vector<int64_t> labels;
  for (auto& [path, label] : test.samples()) labels.push_back(label);
  EXPECT_EQ(labels, (std::vector<int64_t>{1, 2}));
  Generator g(0);
  EXPECT_EQ(test.get(0, g).target.item<int64_t>(), 1);
  fs::create_directories(t.root / "eel");  // empty: once "target 3 is out of range" in the loss, naming no file
  expect_error(
      [&] {
        ImageFolder(t.root.string(), {.height = 2, .width = 2, .classes = {"ant", "bee", "cow"}});
      },
      "has classes [bee, cow, eel], but the training set's are [ant, bee, cow]: 'eel' is not among them");
}

TEST(ImageFolder, CorruptImageIsAnErrorOrSkippedWhenAsked) {
  Tree t;
  std::ofstream(t.root / "bee" / "broken.png") << "\x89PNG\r\n\x1a\nthis is not really a png";
  ImageFolder strict(t.root.string(), {.height = 4, .width = 4});
  ASSERT_EQ(strict.size(), 5);
  Generator g(0);
  int64_t broken = -1;
  for (int64_t i = 0; i < strict.size(); ++i)
    if (fs::path(strict.samples()[static_cast<size_t>(i)].first).filename() == "broken.png") broken = i;
  ASSERT_GE(broken, 0);
  expect_error([&] { strict.get(broken, g); }, "broken.png", "cannot be decoded");
  // Through a loader with workers the error reaches the consumer.
  DataLoader dl(strict, {.batch_size = 5, .workers = 2});
  expect_error(
      [&] {
        for (auto& b : dl) (void)b;
      },
      "broken.png");

  testing::internal::CaptureStderr();
  ImageFolder lenient(t.root.string(), {.height = 4, .width = 4, .skip_corrupt = true});
  std::string warnings = testing::internal::GetCapturedStderr();
  EXPECT_EQ(lenient.size(), 4);
  ASSERT_EQ(lenient.skipped().size(), 1u);
  EXPECT_EQ(fs::path(lenient.skipped()[0]).filename(), "broken.png");
  EXPECT_NE(warnings.find("broken.png"), std::string::npos) << warnings;
  for (int64_t i = 0; i < lenient.size(); ++i) EXPECT_NO_THROW(lenient.get(i, g));
}

TEST(ImageFolder, BadLayoutsAndOptionsAreErrors) {
  Tree t;
  expect_error([&] { ImageFolder((t.root / "nope").string(), {.height = 4, .width = 4}); }, "nope", "not a directory");
  expect_error([&] { ImageFolder(t.root.string(), {}); }, "ImageFolder", "height and width");
  expect_error([&] { ImageFolder(t.root.string(), {.height = 4, .width = 4, .channels = 2}); }, "ImageFolder",
               "channels");
  // No class subfolders (only files), and class folders without images.
  expect_error([&] { ImageFolder((t.root / "ant").string(), {.height = 4, .width = 4}); }, "ant",
               "no class subfolders");
  fs::path empty = t.root / "emptyroot";
  fs::create_directories(empty / "x");
  std::ofstream(empty / "x" / "readme.md") << "hi";
  expect_error([&] { ImageFolder(empty.string(), {.height = 4, .width = 4}); }, "emptyroot", "no images");
  ImageFolder ds(t.root.string(), {.height = 4, .width = 4});
  Generator g(0);
  expect_error([&] { ds.get(4, g); }, "ImageFolder", "out of range");
}

TEST(ImageFolder, AugmentedBatchesDoNotDependOnWorkerCount) {
  Tree t;
  // More images so batches hold several of them.
  for (int i = 0; i < 12; ++i) t.put("cow/x" + std::to_string(i) + ".png", 6 + i % 3, 6, 60 + 10 * i);
  ImageFolderOptions opts{.height = 8, .width = 8};
  opts.transform = transforms::compose({transforms::random_crop(8, 8, 2), transforms::random_horizontal_flip(),
                                        transforms::random_affine(10, 0.1), transforms::normalize({0.5}, {0.5})});
  ImageFolder ds(t.root.string(), opts);
  std::vector<std::vector<float>> ref;
  for (int workers : {0, 1, 3}) {
    DataLoader dl(ds, {.batch_size = 5, .shuffle = true, .workers = workers, .seed = 42});
    std::vector<std::vector<float>> got;
    for (int epoch = 0; epoch < 2; ++epoch)
      for (auto& [x, y] : dl) got.push_back(x.to_vector<float>());
    if (ref.empty())
      ref = got;
    else
      EXPECT_EQ(got, ref) << workers << " workers";
  }
  // And the augmentation is really random: another seed gives other batches.
  DataLoader other(ds, {.batch_size = 5, .shuffle = true, .seed = 43});
  std::vector<std::vector<float>> got;
  for (auto& [x, y] : other) got.push_back(x.to_vector<float>());
  EXPECT_NE(got[0], ref[0]);
}
