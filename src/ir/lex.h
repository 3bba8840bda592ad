#pragma once
// Tokens of the mod IR text form (docs/ir_text.md). Shared by parse.cc and print.cc so that the
// printer's idea of what a spelling means is the parser's.
#include <string>
#include <string_view>
#include <vector>

namespace flexattn::ir::text {

enum class TokKind : unsigned char { End, Ident, Number, Hex, String, Punct };

struct Token {
  TokKind kind = TokKind::End;
  std::string text;       // spelling; String: the decoded contents
  bool is_float = false;  // Number: written with '.' or an exponent
  int line = 1;           // 1-based
  int column = 1;         // 1-based, in bytes
  bool is(std::string_view punct) const { return kind == TokKind::Punct && text == punct; }
  bool is_ident(std::string_view name) const { return kind == TokKind::Ident && text == name; }
};

// The last token is always End (positioned just past the input). Throws flexattn::Error
// "line L, column C: ..." on a character that starts no token or a malformed number or string.
std::vector<Token> lex(std::string_view src);

// How a token is named in "found Y": "'foo'", "number '3'", "end of input".
std::string describe(const Token& t);

[[noreturn]] void fail_at(int line, int column, const std::string& message);
[[noreturn]] inline void fail_at(const Token& t, const std::string& message) {
  fail_at(t.line, t.column, message);
}

bool is_identifier(std::string_view s);
// A string literal that lex() decodes back to `s` (escapes quotes, backslashes, control bytes).
std::string quote(std::string_view s);

}  // namespace flexattn::ir::text
