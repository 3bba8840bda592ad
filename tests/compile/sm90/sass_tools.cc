#include "sass_tools.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <vector>

namespace flexattn::testing_sass {

namespace {

bool executable(const std::string& p) { return access(p.c_str(), X_OK) == 0; }

std::string find_tool(const char* name) {
  std::vector<std::string> dirs;
  if (const char* h = std::getenv("CUDA_HOME")) dirs.push_back(std::string(h) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  if (const char* path = std::getenv("PATH")) {
    std::string s = path;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t end = s.find(':', start);
      dirs.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  for (const std::string& d : dirs)
    if (!d.empty() && executable(d + "/" + name)) return d + "/" + name;
  return "";
}

}  // namespace

std::optional<std::string> disassemble(const std::string& cubin, std::string* why) {
  const std::string tool = find_tool("cuobjdump");
  if (tool.empty()) {
    *why = "cuobjdump not found ($CUDA_HOME/bin, /usr/local/cuda/bin, PATH)";
    return std::nullopt;
  }
  char tmpl[] = "/tmp/flexattn-sass-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) {
    *why = "mkstemp failed";
    return std::nullopt;
  }
  close(fd);
  const std::string path = std::string(tmpl);
  std::ofstream(path, std::ios::binary).write(cubin.data(), std::streamsize(cubin.size()));
  const std::string cmd = "'" + tool + "' -sass '" + path + "' 2>&1";
  std::string out;
  int rc = -1;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    rc = pclose(f);
  }
  std::remove(path.c_str());
  if (rc != 0) {
    *why = "cuobjdump failed (nvdisasm missing?): " + out.substr(0, 300);
    return std::nullopt;
  }
  return out;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + needle.size())) ++n;
  return n;
}

int max_register(const std::string& sass) {
  static const std::regex reg(R"(\bR(\d+)\b)");
  int best = -1;
  for (std::sregex_iterator it(sass.begin(), sass.end(), reg), end; it != end; ++it)
    best = std::max(best, std::stoi((*it)[1].str()));
  return best;
}

std::optional<int> producer_max_register(const std::string& sass) {
  const size_t dealloc = sass.find("USETMAXREG.DEALLOC"), last_exit = sass.rfind("EXIT");
  if (dealloc == std::string::npos || last_exit == std::string::npos || last_exit < dealloc) return std::nullopt;
  return max_register(sass.substr(dealloc, last_exit - dealloc));
}

std::string function_sass(const std::string& sass, const std::string& name) {
  const std::string head = "Function : " + name + "\n";
  const size_t start = sass.find(head);
  if (start == std::string::npos) return "";
  const size_t end = sass.find("Function : ", start + head.size());
  return sass.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::optional<std::string> elf_section(const std::string& cubin, const std::string& name) {
  // ELF64 little-endian: e_shoff at 0x28, e_shentsize 0x3A, e_shnum 0x3C, e_shstrndx 0x3E; a section header
  // has sh_name at 0x00, sh_offset at 0x18, sh_size at 0x20.
  auto rd = [&](size_t at, size_t n) -> uint64_t {
    uint64_t v = 0;
    if (at + n > cubin.size()) return 0;
    std::memcpy(&v, cubin.data() + at, n);
    return v;
  };
  if (cubin.size() < 64 || cubin.compare(0, 4, "\x7f" "ELF") != 0 || cubin[4] != 2) return std::nullopt;
  const uint64_t shoff = rd(0x28, 8), shentsize = rd(0x3A, 2), shnum = rd(0x3C, 2), shstrndx = rd(0x3E, 2);
  if (shstrndx >= shnum) return std::nullopt;
  const uint64_t strtab = rd(shoff + shstrndx * shentsize + 0x18, 8);
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t h = shoff + i * shentsize, off = rd(h + 0x18, 8), size = rd(h + 0x20, 8);
    const size_t at = size_t(strtab + rd(h, 4));
    if (at >= cubin.size() || cubin.compare(at, name.size() + 1, name.c_str(), name.size() + 1) != 0) continue;
    if (off + size > cubin.size()) return std::nullopt;
    return cubin.substr(size_t(off), size_t(size));
  }
  return std::nullopt;
}

}  // namespace flexattn::testing_sass
