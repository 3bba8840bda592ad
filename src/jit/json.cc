#include "jit/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace flexattn::jit {

Json Json::of(const std::vector<std::string>& v) {
  Json j;
  j.kind = Kind::array;
  for (const auto& s : v) j.items.push_back(of(s));
  return j;
}

const Json* Json::get(const std::string& key) const {
  if (kind != Kind::object) return nullptr;
  auto it = fields.find(key);
  return it == fields.end() ? nullptr : &it->second;
}

const std::string* Json::get_string(const std::string& key) const {
  const Json* j = get(key);
  return j && j->kind == Kind::string ? &j->str : nullptr;
}

std::optional<double> Json::get_number(const std::string& key) const {
  const Json* j = get(key);
  if (!j || j->kind != Kind::number) return std::nullopt;
  return j->num;
}

namespace {

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

void write(std::string& out, const Json& j, int indent, int depth) {
  std::string pad, close;
  if (indent > 0) {
    pad.assign(size_t(indent) * size_t(depth + 1) + 1, ' ');
    close.assign(size_t(indent) * size_t(depth) + 1, ' ');
    pad[0] = close[0] = '\n';
  }
  switch (j.kind) {
    case Json::Kind::null: out += "null"; break;
    case Json::Kind::boolean: out += j.b ? "true" : "false"; break;
    case Json::Kind::number: {
      char buf[32];
      // Integers (sizes, counts) print exactly; others keep full precision.
      if (std::isfinite(j.num) && j.num == std::floor(j.num) && std::fabs(j.num) < 9e15)
        std::snprintf(buf, sizeof buf, "%lld", (long long)j.num);
      else if (std::isfinite(j.num))
        std::snprintf(buf, sizeof buf, "%.17g", j.num);
      else
        std::snprintf(buf, sizeof buf, "null");
      out += buf;
      break;
    }
    case Json::Kind::string: write_string(out, j.str); break;
    case Json::Kind::array: {
      out += '[';
      for (size_t i = 0; i < j.items.size(); ++i) {
        if (i) out += ',';
        out += pad;
        write(out, j.items[i], indent, depth + 1);
      }
      out += j.items.empty() ? "" : close;
      out += ']';
      break;
    }
    case Json::Kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : j.fields) {
        if (!first) out += ',';
        out += pad;
        first = false;
        write_string(out, k);
        out += indent > 0 ? ": " : ":";
        write(out, v, indent, depth + 1);
      }
      out += j.fields.empty() ? "" : close;
      out += '}';
      break;
    }
  }
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  bool document(Json& out) {
    if (!value(out, 0)) return false;
    skip_ws();
    return i_ == s_.size();
  }

 private:
  static constexpr int kMaxDepth = 64;

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  bool value(Json& out, int depth) {
    if (depth > kMaxDepth) return false;
    skip_ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') return out.kind = Json::Kind::string, string(out.str);
    if (literal("null")) return out.kind = Json::Kind::null, true;
    if (literal("true")) return out.kind = Json::Kind::boolean, out.b = true, true;
    if (literal("false")) return out.kind = Json::Kind::boolean, out.b = false, true;
    return number(out);
  }

  bool number(Json& out) {
    size_t start = i_;
    while (i_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[i_]) != std::string_view::npos) ++i_;
    if (i_ == start) return false;
    std::string text(s_.substr(start, i_ - start));
    char* end = nullptr;
    out.kind = Json::Kind::number;
    out.num = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size();
  }

  bool hex4(unsigned& v) {
    if (i_ + 4 > s_.size()) return false;
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + unsigned(d);
    }
    return true;
  }

  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
    }
  }

  bool string(std::string& out) {
    ++i_;  // opening quote
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned cp;
          if (!hex4(cp)) return false;
          utf8(out, cp);  // surrogate pairs are not needed by meta.json; kept as two code units
          break;
        }
        default: return false;
      }
    }
    return false;
  }

  bool array(Json& out, int depth) {
    ++i_;
    out.kind = Json::Kind::array;
    if (eat(']')) return true;
    do {
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
    } while (eat(','));
    return eat(']');
  }

  bool object(Json& out, int depth) {
    ++i_;
    out.kind = Json::Kind::object;
    if (eat('}')) return true;
    do {
      skip_ws();
      std::string key;
      if (i_ >= s_.size() || s_[i_] != '"' || !string(key)) return false;
      if (!eat(':')) return false;
      if (!value(out.fields[key], depth + 1)) return false;
    } while (eat(','));
    return eat('}');
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::string to_json(const Json& j, int indent) {
  std::string out;
  write(out, j, indent, 0);
  return out;
}

std::optional<Json> parse_json(std::string_view text) {
  Json j;
  if (!Parser(text).document(j)) return std::nullopt;
  return j;
}

}  // namespace flexattn::jit
