#include "interop/model_file_layers.h"

#include <cmath>
#include <map>

#include "core/shape.h"

namespace ember::model_file {

double Site::real_or(bool given, double v, double def, const std::string& field, bool ok,
                     const std::string& expected) const {
  if (!given) return def;
  valid(std::isfinite(v) && ok, field, v, expected);
  return v;
}

int64_t Site::dimension(int64_t dim, int64_t rank, const std::string& field) const {
  valid(dim >= -rank && dim < rank, field, dim,
        detail::concat("one of its input's ", rank, " dimensions (batch included): 1 to ", rank - 1,
                       ", or from the end -1 to -", rank - 1));
  valid(dim != 0 && dim != -rank, field, dim,
        "a dimension other than 0, the batch: each example's output would depend on the rest of its batch");
  return dim;
}

nn::Size2 Site::size2(const google::protobuf::RepeatedField<int64_t>& v, const std::string& what, nn::Size2 def,
                      int64_t min) const {
  check(v.size() <= 2, kind, what + " has " + std::to_string(v.size()) + " values (expected 1 or 2)");
  if (v.empty()) return def;
  const nn::Size2 s = v.size() == 1 ? nn::Size2(v[0]) : nn::Size2(v[0], v[1]);
  check(s.h >= min && s.w >= min, kind,
        what + " is " + s.str() + " (expected values of at least " + std::to_string(min) + ")");
  return s;
}

int64_t Site::channels(const Tensor& x, int64_t rank) const {
  check(x.dim() == rank, kind,
        "its input is " + shape_str(x.shape()) + " (expected " + std::to_string(rank) + " dimensions, batch included)");
  return x.size(1);
}

namespace {

struct Registry {
  std::map<int, FileLayer> layers;
  std::vector<std::string> duplicates;
};

// Made on first use: registrations run during the library's static initialisation, in no set order.
Registry& registry() {
  static Registry r;
  return r;
}

std::string kind_field(train_file::Layer::KindCase kind) {
  const auto* f = train_file::Layer::descriptor()->FindFieldByNumber(kind);
  return f ? f->name() : "kind " + std::to_string(static_cast<int>(kind));
}

}  // namespace

LayerRegistration::LayerRegistration(train_file::Layer::KindCase kind, FileLayer layer) {
  Registry& r = registry();
  if (!r.layers.emplace(static_cast<int>(kind), layer).second) r.duplicates.push_back(kind_field(kind));
}

const FileLayer* find_layer(train_file::Layer::KindCase kind) {
  const Registry& r = registry();
  auto it = r.layers.find(static_cast<int>(kind));
  return it == r.layers.end() ? nullptr : &it->second;
}

std::vector<std::string> duplicate_layers() {
  return registry().duplicates;
}

}  // namespace ember::model_file
