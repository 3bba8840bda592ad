// Small string matchers for the JIT's names and tool logs. The JIT does not use <regex>: libstdc++'s regex
// templates are weak symbols, and inside a Python process that imported torch first they bound to torch's
// copies, built against other headers, and crashed on first use (seen on the H200 with torch 2.11).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace flexattn::jit::text {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_hex_lower(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }
inline bool is_ident_char(char c) { return is_alpha(c) || is_digit(c) || c == '_'; }
// [A-Za-z0-9_.-]: the characters allowed in cache entry names and kernel prefixes.
inline bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '-'; }

template <class Pred>
bool all_of(std::string_view s, Pred p) {
  for (char c : s)
    if (!p(c)) return false;
  return true;
}

// [A-Za-z_][A-Za-z0-9_]*
inline bool is_identifier(std::string_view s) {
  return !s.empty() && (is_alpha(s[0]) || s[0] == '_') && all_of(s, is_ident_char);
}

// The decimal number that ends right before `unit` (" bytes stack frame" in "8 bytes stack frame"), if any.
inline bool number_before(std::string_view line, std::string_view unit, int64_t& out) {
  size_t at = line.find(unit);
  if (at == std::string_view::npos) return false;
  size_t begin = at;
  while (begin > 0 && is_digit(line[begin - 1])) --begin;
  if (begin == at || at - begin > 18) return false;
  out = 0;
  for (size_t i = begin; i < at; ++i) out = out * 10 + (line[i] - '0');
  return true;
}

// The text after `prefix` up to (not including) the first character in `stop`, or "" when absent.
inline std::string after(std::string_view line, std::string_view prefix, std::string_view stop) {
  size_t at = line.find(prefix);
  if (at == std::string_view::npos) return "";
  std::string_view rest = line.substr(at + prefix.size());
  return std::string(rest.substr(0, rest.find_first_of(stop)));
}

}  // namespace flexattn::jit::text
