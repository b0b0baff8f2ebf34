// Vocabulary files (data/vocabulary.h: what a text model's checkpoint folder holds beside it) on
// arbitrary bytes. A file that loads is saved again and must load back with the same ids and
// frequencies, and its tokens must encode to their own ids.
#include <unistd.h>

#include "data/vocabulary.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::scratch_file(data, size, ".vocab");
  fuzz::errors_only([&] {
    using ember::data::Vocabulary;
    const Vocabulary v = Vocabulary::load(path);
    std::string again = path;  // appended: GCC 12 warns falsely (-Wrestrict) about path + ".again"
    again.append(".again");
    v.save(again);
    const Vocabulary w = Vocabulary::load(again);
    ::unlink(again.c_str());
    if (!w.same_ids_as(v) || w.size() != v.size()) std::abort();
    for (int64_t id = 0; id < v.size(); ++id) {
      if (w.frequency(id) != v.frequency(id) || v.id(v.token(id)) != id) std::abort();
    }
    (void)v.decode(v.encode(v.token(v.size() - 1)));
  });
  return 0;
}
