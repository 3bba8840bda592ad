// Parses the resource report of `ptxas -v`, e.g. (CUDA 13):
//   ptxas info    : Compiling entry function 'k' for 'sm_80'
//   ptxas info    : Function properties for k
//   ptxas         .     8192 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//   ptxas info    : Used 40 registers, used 0 barriers, 4096 bytes smem, 364 bytes cmem[0]
// Field order changed across CUDA versions, so each number is found by its unit, not its position.
#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "jit/nvrtc.h"

namespace flexattn::jit {
namespace {

bool find_number(const std::string& line, const std::regex& re, int64_t& out) {
  std::smatch m;
  if (!std::regex_search(line, m, re)) return false;
  out = std::stoll(m[1].str());
  return true;
}

}  // namespace

std::map<std::string, PtxasInfo> parse_ptxas_info(const std::string& log) {
  static const std::regex entry_re(R"(Compiling entry function '([^']+)')");
  static const std::regex props_re(R"(Function properties for (\S+))");
  static const std::regex stack_re(R"((\d+) bytes stack frame)");
  static const std::regex stores_re(R"((\d+) bytes spill stores)");
  static const std::regex loads_re(R"((\d+) bytes spill loads)");
  static const std::regex regs_re(R"(Used (\d+) registers)");
  static const std::regex smem_re(R"((\d+) bytes smem)");
  static const std::regex cumulative_re(R"((\d+) bytes cumulative stack size)");

  std::map<std::string, PtxasInfo> all;
  std::set<std::string> entries;
  std::string compiling, properties_of;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    int64_t v = 0;
    if (std::regex_search(line, m, entry_re)) {
      compiling = m[1].str();
      entries.insert(compiling);
      all[compiling];
    } else if (std::regex_search(line, m, props_re)) {
      properties_of = m[1].str();
    } else if (find_number(line, stack_re, v)) {
      PtxasInfo& p = all[properties_of];
      p.stack = v;
      if (find_number(line, stores_re, v)) p.spill_stores = v;
      if (find_number(line, loads_re, v)) p.spill_loads = v;
    } else if (find_number(line, regs_re, v) && !compiling.empty()) {
      PtxasInfo& p = all[compiling];
      p.registers = int(v);
      if (find_number(line, smem_re, v)) p.smem = v;
      // The entry's own frame excludes what non-inlined callees need; the cumulative size includes it.
      if (find_number(line, cumulative_re, v)) p.stack = std::max(p.stack, v);
    }
  }
  std::map<std::string, PtxasInfo> out;
  for (const auto& name : entries) out[name] = all[name];
  return out;
}

}  // namespace flexattn::jit
