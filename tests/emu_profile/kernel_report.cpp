// The kernel efficiency report: symbols, ptxas data, occupancy, roofline and the table.
#include "emu_profile/kernel_report.h"

#include <cxxabi.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <regex>
#include <sstream>

#include "core/cuda/emu/emu_device.h"
#include "core/dispatch.h"

namespace kernel_report {

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : mangled;
}

PtxasTable parse_ptxas(const std::string& text) {
  static const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_\d+)')");
  static const std::regex spill(R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers(?:.*?(\d+) bytes smem)?)");
  PtxasTable t;
  std::istringstream in(text);
  std::string line, name, arch;
  int spill_bytes = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      name = demangle(m[1]), arch = m[2], spill_bytes = 0;
    } else if (!name.empty() && std::regex_search(line, m, spill)) {
      spill_bytes = std::stoi(m[1]) + std::stoi(m[2]);
    } else if (!name.empty() && std::regex_search(line, m, used)) {
      t[name][arch] = PtxasInfo{std::stoi(m[1]), m[2].matched ? std::stoi(m[2]) : 0, spill_bytes};
      name.clear();
    }
  }
  return t;
}

PtxasTable load_ptxas(const std::string& dir) {
  namespace fs = std::filesystem;
  PtxasTable t;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return t;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    const std::string p = it->path().string();
    const std::string suffix = ".ptxas.log";
    if (p.size() < suffix.size() || p.compare(p.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    for (auto& [name, archs] : parse_ptxas(ss.str()))
      for (auto& [arch, info] : archs) t[name][arch] = info;
  }
  return t;
}

std::string default_ptxas_dir() {
#ifdef EMBER_BUILD_DIR
  return EMBER_BUILD_DIR;
#else
  return "";
#endif
}

// Sizes from the CUDA occupancy calculator for compute capability 8.0 and 9.0: 64 warps, 32 blocks
// and 65536 registers per SM, in four sub-partitions of 16384, allocated per warp in units of 256;
// shared memory per block rounded up to 128 bytes, plus 1 KiB the system reserves per block.
Occupancy occupancy(const Arch& arch, int regs, size_t smem, unsigned threads) {
  Occupancy o;
  const int warps = static_cast<int>((threads + 31) / 32);
  if (warps == 0 || regs < 0) return o;
  const int by_warps = 64 / warps, by_blocks = 32;
  int by_regs = by_blocks;
  if (regs > 0) {
    const int regs_per_warp = (regs * 32 + 255) / 256 * 256;
    by_regs = 4 * (16384 / regs_per_warp) / warps;
  }
  const size_t per_block = (smem + 1024 + 127) / 128 * 128;
  const int by_smem = static_cast<int>(static_cast<size_t>(arch.smem_per_sm) / per_block);
  o.blocks = std::min({by_warps, by_blocks, by_regs, by_smem});
  o.limiter = o.blocks == by_regs ? "regs" : o.blocks == by_smem ? "smem" : o.blocks == by_warps ? "warps" : "blocks";
  o.fraction = o.blocks * warps / 64.0;
  return o;
}

double roofline_seconds(const Gpu& g, double bytes, double flops, bool fp64) {
  return std::max(bytes / g.hbm_bytes_per_s, flops / (fp64 ? g.fp64_flops_per_s : g.fp32_flops_per_s));
}

namespace {

struct Symbol {
  std::string function, location;
};

uintptr_t load_base() {
  uintptr_t base = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        *static_cast<uintptr_t*>(data) = info->dlpi_addr;
        return 1;  // the first object is the program itself
      },
      &base);
  return base;
}

// Function and file:line of code addresses of this program, through addr2line (binutils), which
// reads the local symbols and line tables that dladdr cannot see. Empty names when it is missing.
std::map<uintptr_t, Symbol> symbolize(std::vector<uintptr_t> addrs) {
  std::sort(addrs.begin(), addrs.end());
  addrs.erase(std::unique(addrs.begin(), addrs.end()), addrs.end());
  std::map<uintptr_t, Symbol> out;
  const uintptr_t base = load_base();
  for (size_t i = 0; i < addrs.size(); i += 256) {
    std::ostringstream cmd;
    cmd << "addr2line -f -e /proc/" << getpid() << "/exe";
    const size_t end = std::min(addrs.size(), i + 256);
    for (size_t j = i; j < end; ++j) cmd << " 0x" << std::hex << addrs[j] - base;
    FILE* p = popen((cmd.str() + " 2>/dev/null").c_str(), "r");
    if (!p) return out;
    char buf[8192];
    for (size_t j = i; j < end; ++j) {
      Symbol s;
      if (fgets(buf, sizeof buf, p)) s.function = demangle(std::string(buf, strcspn(buf, "\n")));
      if (fgets(buf, sizeof buf, p)) s.location = std::string(buf, strcspn(buf, "\n"));
      out[addrs[j]] = s;
    }
    pclose(p);
  }
  return out;
}

// "ember::cuda::(anonymous namespace)::gemm_kernel<float, false, false>(...)" -> the name with
// its template arguments and without namespaces or parameters.
std::string short_name(std::string full) {
  for (const std::string junk : {"ember::cuda::", "(anonymous namespace)::"})
    for (size_t p; (p = full.find(junk)) != std::string::npos;) full.erase(p, junk.size());
  std::string s;
  int depth = 0;
  for (char ch : full) {  // up to the parameter list, which is the first '(' outside <...>
    if (ch == '<') ++depth;
    if (ch == '>') --depth;
    if (ch == '(' && depth == 0) break;
    s += ch;
  }
  size_t cut = 0;
  depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {  // after the last '::' or ' ' outside <...>
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (depth == 0 && s.compare(i, 2, "::") == 0) cut = i + 2;
    if (depth == 0 && s[i] == ' ') cut = i + 1;
  }
  return s.substr(cut);
}

PtxasInfo find_ptxas(const PtxasTable& t, const std::string& full, const char* arch) {
  auto it = t.find(full);
  if (it == t.end()) return {};
  auto a = it->second.find(arch);
  return a == it->second.end() ? PtxasInfo{} : a->second;
}

// Adds launch l into the row (sites by instruction).
void add_launch(Row& r, const profile::Launch& l) {
  r.launch_blocks.push_back(static_cast<uint64_t>(l.grid[0]) * l.grid[1] * l.grid[2]);
  if (r.launches++ == 0) {
    std::copy(l.grid, l.grid + 3, r.grid);
    std::copy(l.block, l.block + 3, r.block);
    r.smem = l.static_shared + l.dynamic_shared;
    r.stub = l.stub;
  }
  profile::merge(r.totals, l.totals);
  for (const profile::SiteStats& s : l.sites) {
    auto it = std::find_if(r.sites.begin(), r.sites.end(),
                           [&](const profile::SiteStats& x) { return x.site == s.site && x.space == s.space; });
    if (it == r.sites.end()) {
      r.sites.push_back(s);
      continue;
    }
    profile::add(*it, s);
  }
}

}  // namespace

double sm_fill(const Row& r, const Occupancy& occ, const Gpu& g) {
  if (occ.blocks <= 0 || r.launch_blocks.empty()) return -1.0;
  const uint64_t slots = static_cast<uint64_t>(occ.blocks) * static_cast<uint64_t>(g.sms);
  double sum = 0;
  for (uint64_t b : r.launch_blocks) {
    const uint64_t waves = std::max<uint64_t>((b + slots - 1) / slots, 1);
    sum += static_cast<double>(b) / static_cast<double>(waves * slots);
  }
  return sum / static_cast<double>(r.launch_blocks.size());
}

std::vector<Row> rows_of(const std::string& case_name, const std::vector<profile::Launch>& launches,
                         const PtxasTable& ptxas) {
  std::vector<uintptr_t> kernels;
  for (const profile::Launch& l : launches) kernels.push_back(reinterpret_cast<uintptr_t>(l.kernel));
  const std::map<uintptr_t, Symbol> names = symbolize(kernels);
  std::vector<Row> rows;
  std::map<const void*, size_t> index;
  for (size_t i = 0; i < launches.size(); ++i) {
    const profile::Launch& l = launches[i];
    auto [it, fresh] = index.emplace(l.kernel, rows.size());
    if (fresh) {
      Row r;
      r.case_name = case_name;
      const auto n = names.find(reinterpret_cast<uintptr_t>(l.kernel));
      const std::string full = n != names.end() && !n->second.function.empty() && n->second.function != "??"
                                   ? n->second.function
                                   : std::string("kernel@") + std::to_string(reinterpret_cast<uintptr_t>(l.kernel));
      r.kernel = short_name(full);
      r.sm80 = find_ptxas(ptxas, full, "sm_80");
      r.sm90 = find_ptxas(ptxas, full, "sm_90");
      rows.push_back(std::move(r));
    }
    add_launch(rows[it->second], l);
    rows[it->second].positions.push_back(static_cast<int>(i));
  }
  for (Row& r : rows) {
    const unsigned threads = r.block[0] * r.block[1] * r.block[2];
    // ptxas's static shared memory is the GPU's; the emulator's dynamic bytes are the launch's.
    r.occ80 = occupancy(kSm80, r.sm80.regs, r.smem, threads);
    r.occ90 = occupancy(kSm90, r.sm90.regs, r.smem, threads);
  }
  return rows;
}

std::vector<Row> run_case(const Case& c, const PtxasTable& ptxas) {
  std::function<void()> run = c.make(ember::emu::device());
  static thread_local profile::Session* session = nullptr;
  profile::Session s;
  session = &s;
  // The stub a launch belongs to: the last dispatch seen on this thread.
  ember::set_dispatch_observer([](const void* stub, ember::DeviceType, int) {
    for (const ember::StubInfo& i : ember::registered_stubs())
      if (i.stub == stub && session) session->set_stub(i.name);
  });
  run();
  ember::set_dispatch_observer(nullptr);
  session = nullptr;
  std::vector<Row> rows = rows_of(c.name, s.take(), ptxas);
  for (Row& r : rows) {
    r.fp64 = c.fp64;
    if (!c.flop_kernel.empty() && r.kernel.find(c.flop_kernel) != std::string::npos) r.flops = c.flops;
  }
  return rows;
}

}  // namespace kernel_report
