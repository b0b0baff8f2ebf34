// Model and solver files (`ember train FILE.pbtxt`, interop/model_file.h) on arbitrary text: the
// parse, the version and the checks that need no building; then, for a file whose numbers keep
// it small, the networks themselves are built (layer shapes, joins, inputs).
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "fuzz_support.h"
#include "interop/model_file.h"

namespace {

namespace pb = google::protobuf;

// Every integer in `m` (false for an unsigned one, which no layer size uses).
bool collect_ints(const pb::Message& m, std::vector<int64_t>& out) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_INT32:
          out.push_back(f->is_repeated() ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f));
          break;
        case pb::FieldDescriptor::CPPTYPE_INT64:
          out.push_back(f->is_repeated() ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f));
          break;
        case pb::FieldDescriptor::CPPTYPE_UINT32:
        case pb::FieldDescriptor::CPPTYPE_UINT64:
          return false;
        case pb::FieldDescriptor::CPPTYPE_MESSAGE:
          if (!collect_ints(f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f), out)) return false;
          break;
        default:
          break;
      }
    }
  }
  return true;
}

// Whether building the file's networks stays small: building allocates the parameters and runs
// an example through them, and a fuzzed width of 10^9 would only measure the machine's memory. No
// layer holds more weights than the two largest numbers in the file multiplied (4 Mi here; the
// shipped models' largest is 12544 x 128), and examples stay at 1024 values.
bool small_enough(const ember::train_file::TrainFile& spec) {
  std::vector<int64_t> v;
  if (!collect_ints(spec, v)) return false;
  std::sort(v.begin(), v.end(), std::greater<>());
  if (!v.empty() && v[0] > (1 << 22)) return false;
  if (v.size() >= 2 && v[0] * v[1] > (1 << 22)) return false;
  for (const auto& n : spec.network()) {
    int64_t elements = 1;
    for (int64_t d : n.input_shape()) {
      if (d > 1024) return false;
      elements *= d;
      if (elements > 1024) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::scratch_file(data, size, ".pbtxt");
  fuzz::errors_only([&] {
    ember::model_file::LoadedFile f = ember::model_file::load(path);
    if (!small_enough(f.spec)) return;
    for (int n = 0; n < f.spec.network_size(); ++n) (void)ember::model_file::build_network(f, n, 64);
  });
  return 0;
}
