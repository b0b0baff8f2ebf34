// A main() for the fuzz targets in builds without libFuzzer (GCC, or clang without EMBER_FUZZ): it
// runs each file named on the command line, and each file in each folder named, through
// LLVMFuzzerTestOneInput once, in name order. Used by the `fuzz.TARGET.corpus` tests to replay the
// seed and regression corpus; libFuzzer's own main does the same with `-runs=0`.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-", 0) == 0) continue;  // libFuzzer's flags (-runs=0 ...) mean nothing here
    if (fs::is_directory(a)) {
      for (const auto& e : fs::recursive_directory_iterator(a))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (fs::is_regular_file(a)) {
      inputs.push_back(a);
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", a.c_str());
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (expected corpus files or folders)\n");
    return 2;
  }
  for (const fs::path& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu input(s) ran clean\n", inputs.size());
  return 0;
}
