#include "args.h"

#include <charconv>
#include <cmath>

#include "flexattn/error.h"

namespace flexattn::cli {

namespace {
// Where from_chars starts: past one leading '+' (it takes none); null for an empty text or "+-..." ("+-1" ran as -1).
const char* number_start(const std::string& s) {
  if (s.empty()) return nullptr;
  if (s[0] != '+') return s.data();
  return s.size() > 1 && s[1] == '-' ? nullptr : s.data() + 1;
}
}  // namespace

bool parse_int(const std::string& s, int64_t* out) {
  const char* first = number_start(s);
  if (first == nullptr) return false;
  auto [end, ec] = std::from_chars(first, s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_double(const std::string& s, double* out) {
  const char* first = number_start(s);
  if (first == nullptr) return false;
  auto [end, ec] = std::from_chars(first, s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*out);
}

std::pair<std::string, std::string> split_assignment(const std::string& flag, const std::string& text) {
  const size_t eq = text.find('=');
  check(eq != std::string::npos && eq > 0 && eq + 1 < text.size(),
        flag + ": expected NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Args::Args(std::string command, std::vector<FlagSpec> specs) : command_(std::move(command)), specs_(std::move(specs)) {}

const FlagSpec* Args::find(const std::string& name) const {
  for (const FlagSpec& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

void Args::parse(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(arg);
      continue;
    }
    std::string value;
    bool inline_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    const FlagSpec* spec = find(arg);
    check(spec != nullptr, "unknown flag '" + arg + "' for '" + command_ + "' (see flexattn " + command_ + " --help)");
    if (spec->value_name.empty()) {
      // (std::string(arg) += ...: GCC 12 reports a false -Wrestrict for `arg + " ..."` here.)
      check(!inline_value, std::string(arg) += " takes no value");
      value = "1";
    } else if (!inline_value) {
      check(i + 1 < argv.size(), arg + ": missing value " + spec->value_name);
      value = argv[++i];
    }
    auto& slot = values_[arg];
    check(spec->repeatable || slot.empty(), arg + " given more than once");
    slot.push_back(value);
  }
}

std::string Args::usage() const {
  std::string s;
  for (const FlagSpec& f : specs_) {
    std::string left = "  " + f.name + (f.value_name.empty() ? "" : " " + f.value_name);
    if (left.size() < 30) left.append(30 - left.size(), ' ');
    else left += "\n" + std::string(30, ' ');
    s += left + f.help + "\n";
  }
  return s;
}

bool Args::has(const std::string& name) const { return values_.count(name) != 0; }

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& name) const {
  static const std::vector<std::string> kNone;
  auto it = values_.find(name);
  return it == values_.end() ? kNone : it->second;
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  if (!has(name)) return fallback;
  const std::string s = get(name);
  int64_t v = 0;
  check(parse_int(s, &v), name + ": expected an integer, got '" + s + "'");
  check(v >= lo && v <= hi,
        name + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + s);
  return v;
}

uint64_t Args::get_u64(const std::string& name, uint64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string s = get(name);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  check(!s.empty() && ec == std::errc() && end == s.data() + s.size(),
        name + ": expected a non-negative integer, got '" + s + "'");
  return v;
}

DType Args::get_dtype(const std::string& name, DType fallback, const std::vector<DType>& allowed) const {
  if (!has(name)) return fallback;
  const std::string s = get(name);
  DType t;
  std::string names;
  for (DType a : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(a));
  check(parse_dtype(s, &t), name + ": unknown dtype '" + s + "', expected one of " + names);
  bool ok = false;
  for (DType a : allowed) ok = ok || a == t;
  check(ok, name + ": dtype '" + s + "' is not supported here, expected one of " + names);
  return t;
}

}  // namespace flexattn::cli
