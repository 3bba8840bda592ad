#pragma once
// The small JSON subset the cache's meta.json needs: null, bool, number, string, array, object.
// The parser treats its input as untrusted (a cache entry may be truncated or edited by hand):
// it never reads past the end, limits nesting, and reports failure instead of throwing.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flexattn::jit {

struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  static Json of(double v) { Json j; j.kind = Kind::number; j.num = v; return j; }
  static Json of(std::string v) { Json j; j.kind = Kind::string; j.str = std::move(v); return j; }
  static Json of(const char* v) { return of(std::string(v)); }
  static Json of(const std::vector<std::string>& v);
  static Json object() { Json j; j.kind = Kind::object; return j; }

  Json& set(const std::string& key, Json v) { kind = Kind::object; fields[key] = std::move(v); return *this; }
  // Lookups that return nullptr when the field is missing or has another kind.
  const Json* get(const std::string& key) const;
  const std::string* get_string(const std::string& key) const;
  std::optional<double> get_number(const std::string& key) const;
};

std::string to_json(const Json& j, int indent = 2);
std::optional<Json> parse_json(std::string_view text);

}  // namespace flexattn::jit
