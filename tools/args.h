#pragma once
// Command-line flags of the flexattn tool. Every problem (unknown flag, missing or malformed value, a
// flag given twice) is a flexattn::Error whose message names the flag; main() turns it into the single
// line "flexattn: error: ..." and exit code 2.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flexattn/dtype.h"

namespace flexattn::cli {

struct FlagSpec {
  std::string name;           // as typed: "-B", "--mask", ...
  std::string value_name;     // "" for a switch, else shown in help ("N", "NAME[:ARGS]", ...)
  bool repeatable = false;
  std::string help;
};

class Args {
 public:
  Args(std::string command, std::vector<FlagSpec> specs);
  // Accepts "--flag VALUE" and "--flag=VALUE". Sets help_requested() for -h / --help.
  void parse(const std::vector<std::string>& argv);

  bool help_requested() const { return help_; }
  std::string usage() const;  // one line per flag
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
  const std::vector<std::string>& all(const std::string& name) const;
  // Strict integer / number parsing: the whole value must be a number within [lo, hi].
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  uint64_t get_u64(const std::string& name, uint64_t fallback) const;
  DType get_dtype(const std::string& name, DType fallback, const std::vector<DType>& allowed) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  const FlagSpec* find(const std::string& name) const;
  std::string command_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  bool help_ = false;
};

// "name=value" split at the first '='; throws naming `flag` if there is no '=' or a side is empty.
std::pair<std::string, std::string> split_assignment(const std::string& flag, const std::string& text);
bool parse_int(const std::string& s, int64_t* out);
bool parse_double(const std::string& s, double* out);

}  // namespace flexattn::cli
