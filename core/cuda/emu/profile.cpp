// The emulator's efficiency counters (core/cuda/emu/profile.h, docs/cuda/kernel-report.md).
//
// An instrumented kernel calls access() before each load and store. The access is classified by
// its address (the block's shared memory, tracked device memory, or neither: ignored) and held
// among the lane's pending accesses, which absorb the lane's later accesses that continue them
// within one aligned 16-byte chunk: the host compiler splits a float4 load into four 4-byte loads
// (in any order, interleaved with another operand's) that nvcc issues as one. A committed access
// joins the request (site, k) of its warp, where the site is the access's source line and k counts
// the lane's earlier accesses there: the lanes of a warp executing a line's k-th access are taken
// to execute it together, as a converged warp does on a GPU. A request is scored when every lane
// of its warp has joined it, or at the end of the block (then some lane never came: the request is
// partial). Basic blocks are counted per lane: a warp executes a block max(count) times, min(count)
// of them with every lane.
#include "core/cuda/emu/profile.h"

#include <link.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/cuda/emu/emu.h"

namespace ember::emu::profile {

namespace detail {
bool g_hooks_linked = false;
}

namespace {

constexpr unsigned kVectorBytes = 16;  // the widest access of one lane on a GPU

struct Access {
  uintptr_t addr = 0, site = 0;
  unsigned size = 0;
  bool store = false;
  Space space = Space::Global;
};

struct Request {
  uintptr_t pc = 0;  // the instruction of the first lane that joined
  uint32_t mask = 0;
  std::array<uintptr_t, 32> addr{};
  std::array<uint8_t, 32> size{};
};

struct SiteLog {
  std::array<uint32_t, 32> count{};
  std::unordered_map<uint32_t, Request> open;  // by k
};

struct WarpLog {
  uint32_t full = 0;                                            // the lanes this warp has
  std::unordered_map<uintptr_t, SiteLog> sites;                 // by site key (site_key())
  std::unordered_map<uintptr_t, std::array<uint32_t, 32>> bbs;  // per lane executions of a basic block
};

// A lane's accesses not yet committed, oldest first: each may still absorb the lane's next access
// that continues it (a vector access split by the host compiler, whose parts may interleave with
// those of another operand's).
struct Lane {
  std::array<Access, 4> pending;
  unsigned n = 0;
};

struct BlockState {
  unsigned threads = 0;
  std::vector<Lane> lanes;
  std::vector<WarpLog> warps;
  std::vector<std::pair<uintptr_t, uintptr_t>> shared;  // [begin, end)
  size_t static_shared = 0;
};

struct LaunchState {
  Launch launch;
  std::map<uintptr_t, SiteStats> sites;  // by site key
  std::unordered_set<uintptr_t> sectors;
  BlockState block;
  bool in_block = false;
};

thread_local Session* tls_session = nullptr;
thread_local LaunchState* tls_launch = nullptr;
thread_local BlockState* tls_block = nullptr;  // set while a block of a profiled launch runs

// Tracked device memory. Allocation and release take the lock; an access first tries the range it
// hit last on this thread, valid while no range was removed since (the generation).
std::mutex g_mu;
std::map<uintptr_t, uintptr_t> g_ranges;  // begin -> end
std::atomic<uint64_t> g_generation{0};
struct RangeCache {
  uintptr_t begin = 1, end = 0;
  uint64_t generation = ~uint64_t{0};
};
thread_local RangeCache tls_range;

bool is_device(uintptr_t a) {
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (tls_range.generation == gen && a >= tls_range.begin && a < tls_range.end) return true;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_ranges.upper_bound(a);
  if (it == g_ranges.begin()) return false;
  --it;
  if (a >= it->second) return false;
  tls_range = {it->first, it->second, gen};
  return true;
}

// Source lines of instruction addresses, from an addr2line coprocess (binutils) that reads this
// program's line tables: the host compiler may copy one access of the source into several
// instructions (one per path of a branch it duplicated), which nvcc issues as one, so requests
// are keyed by the line. Started outside the fibers (by a Session); without it, by address.
class Lines {
 public:
  ~Lines() {
    if (out_) fclose(out_);
    if (in_ >= 0) close(in_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (pid_ != 0) return;
    pid_ = -1;
    uintptr_t base = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          *static_cast<uintptr_t*>(data) = info->dlpi_addr;
          return 1;
        },
        &base);
    base_ = base;
    int to[2], from[2];
    if (pipe(to) != 0) return;
    if (pipe(from) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    posix_spawn_file_actions_addclose(&fa, to[1]);
    posix_spawn_file_actions_addclose(&fa, from[0]);
    const std::string exe = "/proc/" + std::to_string(getpid()) + "/exe";
    char* argv[] = {const_cast<char*>("addr2line"), const_cast<char*>("-e"), const_cast<char*>(exe.c_str()), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, "addr2line", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(to[0]);
    close(from[1]);
    if (rc != 0) {
      close(to[1]);
      close(from[0]);
      return;
    }
    pid_ = pid, in_ = to[1], out_ = fdopen(from[0], "r");
  }
  // The interned id of the instruction's "file:line" (or of its address, when unknown).
  uint32_t key(uintptr_t pc) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_pc_.find(pc);
    if (it != by_pc_.end()) return it->second;
    std::string where = ask(pc - 1);  // a return address: the call is the byte before
    if (where.empty() || where[0] == '?') where = "pc 0x" + hex(pc);
    auto [name, fresh] = ids_.emplace(where, static_cast<uint32_t>(names_.size()));
    if (fresh) names_.push_back(where);
    by_pc_[pc] = name->second;
    return name->second;
  }
  std::string name(uint32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return id < names_.size() ? names_[id] : "?";
  }

 private:
  static std::string hex(uintptr_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lx", static_cast<unsigned long>(v));
    return buf;
  }
  std::string ask(uintptr_t pc) {
    if (pid_ <= 0 || !out_) return "";
    const std::string q = "0x" + hex(pc - base_) + "\n";
    if (write(in_, q.data(), q.size()) != static_cast<ssize_t>(q.size())) return "";
    char buf[4096];
    if (!fgets(buf, sizeof buf, out_)) return "";
    std::string s(buf, strcspn(buf, "\n"));
    const size_t d = s.find(" (discriminator");
    if (d != std::string::npos) s.resize(d);
    const size_t slash = s.rfind('/', s.rfind('/') - 1);  // keep the last folder
    return slash == std::string::npos || s.rfind('/') == std::string::npos ? s : s.substr(slash + 1);
  }

  std::mutex mu_;
  pid_t pid_ = 0;
  int in_ = -1;
  FILE* out_ = nullptr;
  uintptr_t base_ = 0;
  std::unordered_map<uintptr_t, uint32_t> by_pc_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

Lines& lines() {
  static Lines* l = new Lines;  // never destroyed: hooks may run during static destruction
  return *l;
}

// The site's key: its line's id with the space and the direction in the two low bits.
uintptr_t site_key(const Access& a) {
  return uintptr_t{lines().key(a.site)} << 2 | static_cast<uintptr_t>(a.space) << 1 | static_cast<uintptr_t>(a.store);
}

// The distinct [begin, end) byte ranges of a request's lanes, sorted and merged.
std::vector<std::pair<uintptr_t, uintptr_t>> distinct_ranges(const Request& r) {
  std::vector<std::pair<uintptr_t, uintptr_t>> v;
  for (unsigned l = 0; l < 32; ++l)
    if (r.mask >> l & 1) v.emplace_back(r.addr[l], r.addr[l] + r.size[l]);
  std::sort(v.begin(), v.end());
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  for (const auto& x : v) {
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

void score_global(const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges, uint64_t bytes, SiteStats& s,
                  std::unordered_set<uintptr_t>& launch_sectors) {
  std::vector<uintptr_t> sectors;
  for (const auto& [b, e] : ranges)
    for (uintptr_t x = b >> 5; x <= (e - 1) >> 5; ++x) sectors.push_back(x);
  std::sort(sectors.begin(), sectors.end());
  sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
  s.sectors += sectors.size();
  s.sectors_needed += (bytes + 31) / 32;
  launch_sectors.insert(sectors.begin(), sectors.end());
}

// Shared memory serves 32 banks of 4-byte words per pass (wavefront): a request needs as many
// passes as the most distinct words any one bank holds (lanes reading the same word share it),
// and at least one per 128 bytes.
void score_shared(const std::vector<std::pair<uintptr_t, uintptr_t>>& ranges, uint64_t bytes, SiteStats& s) {
  std::vector<uintptr_t> words;
  for (const auto& [b, e] : ranges)
    for (uintptr_t w = b >> 2; w <= (e - 1) >> 2; ++w) words.push_back(w);
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  std::array<uint32_t, 32> per_bank{};
  for (uintptr_t w : words) ++per_bank[w % 32];
  const uint64_t ideal = std::max<uint64_t>(1, (bytes + 127) / 128);
  s.wavefronts += std::max<uint64_t>(ideal, *std::max_element(per_bank.begin(), per_bank.end()));
  s.ideal_wavefronts += ideal;
}

void score(LaunchState& ls, uintptr_t key, const Request& r, uint32_t full) {
  SiteStats& s = ls.sites[key];
  if (!s.site) s.site = r.pc;
  s.space = static_cast<Space>(key >> 1 & 1);
  s.store = key & 1;
  const auto ranges = distinct_ranges(r);
  uint64_t bytes = 0;
  for (const auto& [b, e] : ranges) bytes += e - b;
  ++s.requests;
  s.lanes += static_cast<uint64_t>(__builtin_popcount(r.mask));
  s.bytes += bytes;
  if (r.mask != full) ++s.partial;
  if (s.space == Space::Global)
    score_global(ranges, bytes, s, ls.sectors);
  else
    score_shared(ranges, bytes, s);
}

unsigned linear_thread() {
  const uint3 t = ::ember::emu::detail::tls_thread_idx;
  const dim3 d = ::ember::emu::detail::tls_block_dim;
  return t.x + d.x * (t.y + d.y * t.z);
}

void commit(BlockState& b, unsigned tid, const Access& a) {
  WarpLog& w = b.warps[tid / 32];
  const unsigned lane = tid % 32;
  const uintptr_t key = site_key(a);
  SiteLog& s = w.sites[key];
  const uint32_t k = s.count[lane]++;
  Request& r = s.open[k];
  if (!r.mask) r.pc = a.site;
  r.mask |= 1u << lane;
  r.addr[lane] = a.addr;
  r.size[lane] = static_cast<uint8_t>(std::min<unsigned>(a.size, 255));
  if (r.mask == w.full) {
    score(*tls_launch, key, r, w.full);
    s.open.erase(k);
  }
}

// Whether `a` (pending) and the new access are one vector access the host compiler split.
bool continues(const Access& a, uintptr_t addr, unsigned size, bool store, Space space) {
  if (a.store != store || a.space != space) return false;
  if (addr != a.addr + a.size && addr + size != a.addr) return false;
  const uintptr_t lo = std::min(addr, a.addr), hi = std::max(addr + size, a.addr + a.size);
  return lo / kVectorBytes == (hi - 1) / kVectorBytes;
}

void flush_lane(BlockState& b, unsigned tid) {
  Lane& l = b.lanes[tid];
  for (unsigned i = 0; i < l.n; ++i) commit(b, tid, l.pending[i]);
  l.n = 0;
}

// After slot i grew: absorbs a later slot that now continues it (the host compiler loaded the
// parts out of order: x[3], x[2], ... with another operand's between).
void coalesce(Lane& l, unsigned i) {
  Access& p = l.pending[i];
  for (unsigned j = 0; j < l.n; ++j) {
    const Access& q = l.pending[j];
    if (j == i || !continues(p, q.addr, q.size, q.store, q.space)) continue;
    const uintptr_t lo = std::min(q.addr, p.addr), hi = std::max(q.addr + q.size, p.addr + p.size);
    p.addr = lo;
    p.size = static_cast<unsigned>(hi - lo);
    std::move(l.pending.begin() + j + 1, l.pending.begin() + l.n, l.pending.begin() + j);
    --l.n;
    return;
  }
}

// Adds the access to the lane's pending ones: merged into the first it continues, else appended
// (committing the oldest when all four slots are taken).
void add_pending(BlockState& b, unsigned tid, const Access& a) {
  Lane& l = b.lanes[tid];
  for (unsigned i = 0; i < l.n; ++i) {
    Access& p = l.pending[i];
    if (!continues(p, a.addr, a.size, a.store, a.space)) continue;
    const uintptr_t lo = std::min(a.addr, p.addr), hi = std::max(a.addr + a.size, p.addr + p.size);
    p.addr = lo;
    p.size = static_cast<unsigned>(hi - lo);
    coalesce(l, i);
    return;
  }
  if (l.n == l.pending.size()) {
    commit(b, tid, l.pending[0]);
    std::move(l.pending.begin() + 1, l.pending.end(), l.pending.begin());
    --l.n;
  }
  l.pending[l.n++] = a;
}

}  // namespace

double global_efficiency(const SiteStats& s) {
  return s.sectors ? static_cast<double>(s.sectors_needed) / static_cast<double>(s.sectors) : 1.0;
}
double wavefronts_per_request(const SiteStats& s) {
  return s.requests ? static_cast<double>(s.wavefronts) / static_cast<double>(s.requests) : 0.0;
}
double excess_wavefronts(const SiteStats& s) {
  return s.ideal_wavefronts ? static_cast<double>(s.wavefronts) / static_cast<double>(s.ideal_wavefronts) : 1.0;
}
double divergence(const Totals& t) {
  return t.branches ? static_cast<double>(t.divergent_branches) / static_cast<double>(t.branches) : 0.0;
}

void add(SiteStats& into, const SiteStats& s) {
  into.requests += s.requests;
  into.lanes += s.lanes;
  into.bytes += s.bytes;
  into.sectors += s.sectors;
  into.sectors_needed += s.sectors_needed;
  into.wavefronts += s.wavefronts;
  into.ideal_wavefronts += s.ideal_wavefronts;
  into.partial += s.partial;
}

void merge(Totals& into, const Totals& t) {
  add(into.global_load, t.global_load);
  add(into.global_store, t.global_store);
  add(into.shared_load, t.shared_load);
  add(into.shared_store, t.shared_store);
  into.branches += t.branches;
  into.divergent_branches += t.divergent_branches;
  into.unique_global_bytes += t.unique_global_bytes;
}

Session::Session() : outer_(tls_session) {
  tls_session = this;
  if (detail::g_hooks_linked) lines().start();
}
Session::~Session() {
  tls_session = outer_;
}
std::vector<Launch> Session::take() {
  std::vector<Launch> v;
  v.swap(launches_);
  return v;
}

void track(const void* p, size_t bytes) {
  detail::device_allocated(p, bytes);
}
void untrack(const void* p) {
  detail::device_freed(p);
}
bool instrumented() {
  return detail::g_hooks_linked;
}

namespace detail {

bool active() {
  return tls_session != nullptr;
}

// Every emulated allocation and free comes through these two; a program without the hooks (every
// emulated test but the profiled ones) never asks which allocation an address lies in, so it
// takes no lock and keeps no map.
void device_allocated(const void* p, size_t bytes) {
  if (!g_hooks_linked) return;
  const auto b = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(g_mu);
  g_ranges[b] = b + std::max<size_t>(bytes, 1);
}

void device_freed(const void* p) {
  if (!g_hooks_linked) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ranges.erase(reinterpret_cast<uintptr_t>(p))) g_generation.fetch_add(1, std::memory_order_release);
}

void launch_begin(const void* kernel, const unsigned grid[3], const unsigned block[3], size_t dynamic_shared) {
  if (!tls_session) return;
  auto* ls = new LaunchState;
  ls->launch.kernel = kernel;
  ls->launch.stub = tls_session->stub();
  std::copy(grid, grid + 3, ls->launch.grid);
  std::copy(block, block + 3, ls->launch.block);
  ls->launch.dynamic_shared = dynamic_shared;
  tls_launch = ls;
}

void block_begin(unsigned threads, const void* dynamic, size_t dynamic_bytes) {
  if (!tls_launch) return;
  BlockState& b = tls_launch->block;
  b = BlockState{};
  b.threads = threads;
  b.lanes.assign(threads, Lane{});
  b.warps.resize((threads + 31) / 32);
  for (unsigned w = 0; w < b.warps.size(); ++w) {
    const unsigned n = std::min(32u, threads - w * 32);
    b.warps[w].full = n == 32 ? ~0u : (1u << n) - 1;
  }
  if (dynamic_bytes) {
    const auto d = reinterpret_cast<uintptr_t>(dynamic);
    b.shared.emplace_back(d, d + dynamic_bytes);
  }
  tls_block = &b;
}

void shared_allocated(const void* p, size_t bytes, bool is_static) {
  if (!tls_block) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  tls_block->shared.emplace_back(a, a + bytes);
  if (is_static) tls_block->static_shared += bytes;
}

void fiber_switch() {
  if (tls_block) flush_lane(*tls_block, linear_thread());
}

// Scores what the block left open: requests some lane never joined, and the basic blocks.
void block_end() {
  if (!tls_block) return;
  BlockState& b = *tls_block;
  LaunchState& ls = *tls_launch;
  for (unsigned t = 0; t < b.threads; ++t) flush_lane(b, t);
  for (WarpLog& w : b.warps) {
    for (auto& [key, s] : w.sites)
      for (auto& [k, r] : s.open) score(ls, key, r, w.full);
    for (const auto& [site, counts] : w.bbs) {
      uint32_t lo = ~0u, hi = 0;
      for (unsigned l = 0; l < 32; ++l) {
        if (!(w.full >> l & 1)) continue;
        lo = std::min(lo, counts[l]);
        hi = std::max(hi, counts[l]);
      }
      ls.launch.totals.branches += hi;
      ls.launch.totals.divergent_branches += hi - lo;
    }
  }
  ls.launch.static_shared = std::max(ls.launch.static_shared, b.static_shared);
  tls_block = nullptr;
}

void launch_end() {
  if (!tls_launch) return;
  std::unique_ptr<LaunchState> ls(tls_launch);
  tls_launch = nullptr;
  tls_block = nullptr;
  Launch& l = ls->launch;
  for (const auto& [key, s] : ls->sites) {
    l.sites.push_back(s);
    l.sites.back().location = lines().name(static_cast<uint32_t>(key >> 2));
    Totals one;
    (s.space == Space::Global ? (s.store ? one.global_store : one.global_load)
                              : (s.store ? one.shared_store : one.shared_load)) = s;
    merge(l.totals, one);
  }
  l.totals.unique_global_bytes = 32 * ls->sectors.size();
  if (tls_session) tls_session->add(std::move(l));
}

void access(uintptr_t addr, unsigned size, bool store, uintptr_t site) {
  BlockState* b = tls_block;
  if (!b || size == 0) return;
  Space space;
  if (std::any_of(b->shared.begin(), b->shared.end(),
                  [addr](const auto& r) { return addr >= r.first && addr < r.second; }))
    space = Space::Shared;
  else if (is_device(addr))
    space = Space::Global;
  else
    return;
  add_pending(*b, linear_thread(), Access{addr, site, size, store, space});
}

void basic_block(uintptr_t site) {
  BlockState* b = tls_block;
  if (!b) return;
  const unsigned tid = linear_thread();
  ++b->warps[tid / 32].bbs[site][tid % 32];
}

}  // namespace detail

void end_vector_access() {
  if (BlockState* b = tls_block) flush_lane(*b, linear_thread());
}

}  // namespace ember::emu::profile
