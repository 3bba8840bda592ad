#include "lex.h"

#include <cstdio>

#include "flexattn/error.h"

namespace flexattn::ir::text {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

std::string printable_char(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", unsigned(static_cast<unsigned char>(c)));
  return buf;
}

// Longest match first: "**" before "*", "//" before "/", and so on.
constexpr std::string_view kPuncts[] = {"**", "//", "==", "!=", "<=", ">=", "&&", "||", "+", "-", "*",
                                        "/",  "%",  "<",  ">",  "!",  "~",  "?",  ":",  ",", "(", ")",
                                        "[",  "]",  "{",  "}",  "=",  ";",  "&",  "|",  "@"};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space_and_comments();
      Token t;
      t.line = line_;
      t.column = column();
      if (i_ >= s_.size()) {
        out.push_back(t);
        return out;
      }
      const char c = s_[i_];
      if (is_ident_start(c)) {
        t.kind = TokKind::Ident;
        t.text = take_while(is_ident_char);
      } else if (is_digit(c) || (c == '.' && i_ + 1 < s_.size() && is_digit(s_[i_ + 1]))) {
        number(&t);
      } else if (c == '"') {
        string(&t);
      } else {
        punct(&t);
      }
      out.push_back(std::move(t));
    }
  }

 private:
  int column() const { return int(i_ - line_start_) + 1; }

  void skip_space_and_comments() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\n') {
        ++i_;
        ++line_;
        line_start_ = i_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        return;
      }
    }
  }

  template <typename Pred>
  std::string take_while(Pred p) {
    const size_t b = i_;
    while (i_ < s_.size() && p(s_[i_])) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }

  void number(Token* t) {
    const size_t b = i_;
    const int col = column();
    t->kind = TokKind::Number;
    if (s_[i_] == '0' && i_ + 1 < s_.size() && (s_[i_ + 1] == 'x' || s_[i_ + 1] == 'X')) {
      i_ += 2;
      t->kind = TokKind::Hex;
      if (take_while(is_hex_digit).empty()) bad_number(b, col);
    } else {
      take_while(is_digit);
      if (i_ < s_.size() && s_[i_] == '.') {
        t->is_float = true;
        ++i_;
        take_while(is_digit);
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        t->is_float = true;
        ++i_;
        if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
        if (take_while(is_digit).empty()) bad_number(b, col);
      }
    }
    // "3i32" or "1.5.2" would otherwise lex as two tokens and give a confusing error later.
    if (i_ < s_.size() && (is_ident_char(s_[i_]) || s_[i_] == '.')) bad_number(b, col);
    t->text = std::string(s_.substr(b, i_ - b));
  }

  [[noreturn]] void bad_number(size_t b, int col) {
    while (i_ < s_.size() && (is_ident_char(s_[i_]) || s_[i_] == '.')) ++i_;
    fail_at(line_, col, "expected a number, found malformed number '" + std::string(s_.substr(b, i_ - b)) + "'");
  }

  void string(Token* t) {
    const int col = column();
    t->kind = TokKind::String;
    ++i_;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n')
        fail_at(line_, col, "expected '\"' to close the string, found end of " +
                                std::string(i_ >= s_.size() ? "input" : "line"));
      const char c = s_[i_++];
      if (c == '"') return;
      if (c != '\\') {
        t->text += c;
        continue;
      }
      const int esc_col = column() - 1;
      const char e = i_ < s_.size() ? s_[i_++] : '\0';
      if (e == '"' || e == '\\') {
        t->text += e;
      } else if (e == 'x' && i_ + 1 < s_.size() && is_hex_digit(s_[i_]) && is_hex_digit(s_[i_ + 1])) {
        t->text += char(std::stoi(std::string(s_.substr(i_, 2)), nullptr, 16));
        i_ += 2;
      } else {
        fail_at(line_, esc_col, "expected an escape \\\" \\\\ or \\xHH, found '\\" + std::string(1, e) + "'");
      }
    }
  }

  void punct(Token* t) {
    for (std::string_view p : kPuncts) {
      if (s_.substr(i_, p.size()) == p) {
        t->kind = TokKind::Punct;
        t->text = std::string(p);
        i_ += p.size();
        return;
      }
    }
    if (s_[i_] == '^')  // (Python's xor: the text form has no operator for it)
      fail_at(line_, column(), "expected a token, found '^': the text form has no xor operator; write a != b for "
                               "bools, (a | b) - (a & b) for integers, a ** b for a power");
    fail_at(line_, column(), "expected a token, found " + printable_char(s_[i_]));
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

std::vector<Token> lex(std::string_view src) { return Lexer(src).run(); }

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokKind::End: return "end of input";
    case TokKind::Ident: return "'" + t.text + "'";
    case TokKind::Number: return "number '" + t.text + "'";
    case TokKind::Hex: return "hexadecimal number '" + t.text + "'";
    case TokKind::String: return "string " + quote(t.text);
    case TokKind::Punct: return "'" + t.text + "'";
  }
  return "?";
}

void fail_at(int line, int column, const std::string& message) {
  throw Error("line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message);
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(u));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace flexattn::ir::text
