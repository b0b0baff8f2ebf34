#include "core/kernel_choice.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace ember {

namespace {

constexpr std::array<const char*, kNumKernelFamilies> kFamilyNames = {"gemm", "conv", "pool", "batch_norm", "rnn"};

struct Choices {
  std::mutex mu;
  bool loaded = false;
  std::array<KernelChoice, kNumKernelFamilies> choice{};
};

Choices& choices() {
  static Choices c;
  return c;
}

std::atomic<bool> g_deterministic{false};
std::array<std::atomic<bool>, kNumKernelFamilies> g_has_vendor{};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Parses a whole spec into `out` (starting from `out`'s values) without touching the globals, so
// that an invalid spec changes nothing.
void parse_spec(const std::string& spec, std::array<KernelChoice, kNumKernelFamilies>& out) {
  const std::string s = trim(spec);
  if (s.empty()) return;
  if (s.find('=') == std::string::npos) {
    out.fill(parse_kernel_choice(s));
    return;
  }
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    EMBER_CHECK(eq != std::string::npos, "EMBER_KERNELS: '", trim(item),
                "' is not family=choice (expected e.g. gemm=native,conv=auto, or one of native, vendor, auto)");
    out[static_cast<int>(parse_kernel_family(trim(item.substr(0, eq))))] =
        parse_kernel_choice(trim(item.substr(eq + 1)));
  }
}

void load_locked(Choices& c, const char* env) {
  c.choice.fill(KernelChoice::Auto);
  if (env) parse_spec(env, c.choice);
  c.loaded = true;
}

void ensure_loaded(Choices& c) {
  if (!c.loaded) load_locked(c, std::getenv("EMBER_KERNELS"));
}

}  // namespace

const char* kernel_family_name(KernelFamily f) {
  return kFamilyNames[static_cast<int>(f)];
}

const char* kernel_choice_name(KernelChoice c) {
  switch (c) {
    case KernelChoice::Native:
      return "native";
    case KernelChoice::Vendor:
      return "vendor";
    default:
      return "auto";
  }
}

KernelChoice parse_kernel_choice(const std::string& s) {
  if (s == "native") return KernelChoice::Native;
  if (s == "vendor") return KernelChoice::Vendor;
  if (s == "auto") return KernelChoice::Auto;
  EMBER_FAIL("kernel choice: '", s, "' is not one of native, vendor, auto");
}

KernelFamily parse_kernel_family(const std::string& s) {
  for (int i = 0; i < kNumKernelFamilies; ++i)
    if (s == kFamilyNames[i]) return static_cast<KernelFamily>(i);
  EMBER_FAIL("kernel choice: '", s, "' is not an op family (expected gemm, conv, pool, batch_norm or rnn)");
}

KernelChoice kernel_choice(KernelFamily f) {
  Choices& c = choices();
  std::lock_guard<std::mutex> lock(c.mu);
  ensure_loaded(c);
  return c.choice[static_cast<int>(f)];
}

void set_kernel_choice(KernelFamily f, KernelChoice choice) {
  Choices& c = choices();
  std::lock_guard<std::mutex> lock(c.mu);
  ensure_loaded(c);
  c.choice[static_cast<int>(f)] = choice;
}

void set_kernel_choices(const std::string& spec) {
  Choices& c = choices();
  std::lock_guard<std::mutex> lock(c.mu);
  ensure_loaded(c);
  auto next = c.choice;
  parse_spec(spec, next);
  c.choice = next;
}

void register_vendor(KernelFamily f) {
  g_has_vendor[static_cast<int>(f)].store(true);
}

bool has_vendor(KernelFamily f) {
  return g_has_vendor[static_cast<int>(f)].load();
}

namespace {
struct NativeTable {
  std::mutex mu;
  std::map<const void*, std::pair<KernelFamily, NativeEntry>> entries;
};
NativeTable& natives() {
  static NativeTable* t = new NativeTable();  // used from static initialisers of other files
  return *t;
}
}  // namespace

NativeEntry& native_entry(const void* stub, KernelFamily f) {
  NativeTable& t = natives();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.entries.try_emplace(stub, f, NativeEntry{}).first;
  return it->second.second;  // std::map references stay valid
}

bool has_native(KernelFamily f) {
  NativeTable& t = natives();
  std::lock_guard<std::mutex> lock(t.mu);
  for (const auto& [stub, e] : t.entries)
    if (e.first == f && e.second.fn) return true;
  return false;
}

void set_deterministic(bool on) {
  g_deterministic.store(on);
}

bool deterministic() {
  return g_deterministic.load();
}

void detail::reset_kernel_choices(const char* env) {
  Choices& c = choices();
  std::lock_guard<std::mutex> lock(c.mu);
  auto next = c.choice;
  next.fill(KernelChoice::Auto);
  if (env) parse_spec(env, next);
  c.choice = next;
  c.loaded = true;
  g_deterministic.store(false);
}

KernelPick KernelSelector::run(KernelFamily family, const std::string& key, const KernelCandidate& native,
                               const KernelCandidate& vendor, const KernelTimer& timer, bool may_time) {
  const bool det = deterministic();
  const bool can_native = native.available && native.run && (!det || native.deterministic);
  const bool can_vendor = vendor.available && vendor.run && (!det || vendor.deterministic);
  EMBER_CHECK(
      can_native || can_vendor, kernel_family_name(family), ": no ", det ? "deterministic " : "", "kernel can run ",
      key, " (native: ", native.available ? (native.deterministic ? "yes" : "not deterministic") : "not available",
      ", vendor: ", vendor.available ? (vendor.deterministic ? "yes" : "not deterministic") : "not available", ")");
  auto run_one = [&](KernelPick p) {
    (p == KernelPick::Native ? native : vendor).run();
    return p;
  };
  if (!can_native) return run_one(KernelPick::Vendor);
  if (!can_vendor) return run_one(KernelPick::Native);

  const KernelChoice choice = kernel_choice(family);
  if (choice == KernelChoice::Native) return run_one(KernelPick::Native);
  if (choice == KernelChoice::Vendor) return run_one(KernelPick::Vendor);

  if (auto hit = cached(family, key)) return run_one(*hit);
  if (!may_time || !timer) return run_one(KernelPick::Vendor);

  // Both warm up before either is timed, so the second one does not benefit from the first's
  // caches being warm while the first paid for them.
  native.run();
  vendor.run();
  const double t_vendor = timer(vendor.run);
  const double t_native = timer(native.run);  // last: its output stands, and it is the winner on ties
  KernelPick pick = t_native <= t_vendor ? KernelPick::Native : KernelPick::Vendor;
  if (pick == KernelPick::Vendor) vendor.run();  // the output must be the winner's own
  std::lock_guard<std::mutex> lock(mu_);
  cache_.emplace(std::make_pair(family, key), pick);
  return pick;
}

std::optional<KernelPick> KernelSelector::cached(KernelFamily family, const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find({family, key});
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

void KernelSelector::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
}

size_t KernelSelector::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

KernelSelector& kernel_selector() {
  static KernelSelector* s = new KernelSelector();  // leaked: used by kernels running at exit
  return *s;
}

}  // namespace ember
