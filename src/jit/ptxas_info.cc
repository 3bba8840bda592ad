// Parses the resource report of `ptxas -v`, e.g. (CUDA 13):
//   ptxas info    : Compiling entry function 'k' for 'sm_80'
//   ptxas info    : Function properties for k
//   ptxas         .     8192 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
//   ptxas info    : Used 40 registers, used 0 barriers, 4096 bytes smem, 364 bytes cmem[0]
// Field order changed across CUDA versions, so each number is found by its unit, not its position.
#include <algorithm>
#include <set>
#include <sstream>

#include "jit/nvrtc.h"
#include "jit/text_match.h"

namespace flexattn::jit {

std::map<std::string, PtxasInfo> parse_ptxas_info(const std::string& log) {
  std::map<std::string, PtxasInfo> all;
  std::set<std::string> entries;
  std::string compiling, properties_of;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    int64_t v = 0;
    if (std::string e = text::after(line, "Compiling entry function '", "'"); !e.empty()) {
      compiling = e;
      entries.insert(compiling);
      all[compiling];
    } else if (std::string f = text::after(line, "Function properties for ", " \t\r"); !f.empty()) {
      properties_of = f;
    } else if (text::number_before(line, " bytes stack frame", v)) {
      PtxasInfo& p = all[properties_of];
      p.stack = v;
      if (text::number_before(line, " bytes spill stores", v)) p.spill_stores = v;
      if (text::number_before(line, " bytes spill loads", v)) p.spill_loads = v;
    } else if (line.find("Used ") != std::string::npos && text::number_before(line, " registers", v) &&
               !compiling.empty()) {
      PtxasInfo& p = all[compiling];
      p.registers = int(v);
      if (text::number_before(line, " bytes smem", v)) p.smem = v;
      // The entry's own frame excludes what non-inlined callees need; the cumulative size includes it.
      if (text::number_before(line, " bytes cumulative stack size", v)) p.stack = std::max(p.stack, v);
    }
  }
  std::map<std::string, PtxasInfo> out;
  for (const auto& name : entries) out[name] = all[name];
  return out;
}

}  // namespace flexattn::jit
