// Every parse error: "line L, column C: expected X, found Y" (or the builder's complaint) at the
// offending token, and never a crash on hostile input.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "flexattn/error.h"
#include "flexattn/ir_passes.h"
#include "flexattn/ir_text.h"

namespace flexattn::ir {
namespace {

std::string error_of(const std::string& src, const ParseOptions& opt = {}) {
  try {
    parse(src, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ParseErrors, EmptyInput) {
  EXPECT_EQ(error_of(""), "line 1, column 1: expected an expression, found end of input");
  EXPECT_EQ(error_of("  # only a comment\n"), "line 2, column 1: expected an expression, found end of input");
  EXPECT_EQ(error_of("score +"), "line 1, column 8: expected an expression, found end of input");
}

TEST(ParseErrors, UnbalancedParentheses) {
  EXPECT_EQ(error_of("(score + 1"), "line 1, column 11: expected ')', found end of input");
  EXPECT_EQ(error_of("score + 1)"), "line 1, column 10: expected end of input, found ')'");
  EXPECT_EQ(error_of("tanh(score"), "line 1, column 11: expected ',' or ')', found end of input");
  EXPECT_EQ(error_of("bias[q, kv"), "line 1, column 11: expected ',' or ']', found end of input");
  EXPECT_EQ(error_of("(1, 2)"), "line 1, column 3: expected ')', found ','");
  EXPECT_EQ(error_of("q < kv ? 1"), "line 1, column 11: expected ':', found end of input");
}

TEST(ParseErrors, TrailingInput) {
  EXPECT_EQ(error_of("score score"), "line 1, column 7: expected end of input, found 'score'");
  EXPECT_EQ(error_of("score;;"), "line 1, column 7: expected end of input, found ';'");
  EXPECT_EQ(error_of("score 2"), "line 1, column 7: expected end of input, found number '2'");
}

TEST(ParseErrors, PositionsCountLinesAndColumns) {
  EXPECT_EQ(error_of("score +\n  # note\n    * 2"), "line 3, column 5: expected an expression, found '*'");
  EXPECT_EQ(error_of("x = 1;\ny = x +;\ny"), "line 2, column 8: expected an expression, found ';'");
}

TEST(ParseErrors, Functions) {
  const std::string unknown = error_of("foo(score)");
  EXPECT_EQ(unknown.substr(0, 35), "line 1, column 1: expected a functi");
  EXPECT_NE(unknown.find("found unknown function 'foo'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("sigmoid"), std::string::npos) << unknown;
  EXPECT_EQ(error_of("score + tanh(score, 1)"), "line 1, column 9: function 'tanh' takes 1 argument, got 2");
  EXPECT_EQ(error_of("where(q < kv)"), "line 1, column 1: function 'where' takes 3 arguments, got 1");
  EXPECT_EQ(error_of("max()"), "line 1, column 1: function 'max' takes 2 arguments, got 0");
  EXPECT_EQ(error_of("q(1)").substr(0, 30), "line 1, column 1: expected a f");
}

TEST(ParseErrors, Buffers) {
  EXPECT_EQ(error_of("score + bias[]"), "line 1, column 13: buffer 'bias' takes 1 to 4 indices, got 0");
  EXPECT_EQ(error_of("bias[b, h, q, kv, b]"), "line 1, column 5: buffer 'bias' takes 1 to 4 indices, got 5");
  EXPECT_EQ(error_of("bias[score]"), "line 1, column 1: buffer 'bias': index 0 must be an integer, got f32");
  EXPECT_EQ(error_of("bias[q, 1.5]"),
            "line 1, column 1: buffer 'bias': index 1 must be an integer, got f32 (python scalar)");
  EXPECT_EQ(error_of("score[q]"), "line 1, column 1: expected a buffer name before '[', found reserved name 'score'");
  EXPECT_EQ(error_of("bias{f64}[q]"), "line 1, column 1: buffer 'bias': f64 buffers are not supported (use f32)");
  ParseOptions opt;
  opt.buffer_dtypes["bias"] = DType::BF16;
  EXPECT_EQ(error_of("bias{f32}[q]", opt),
            "line 1, column 1: buffer 'bias' is annotated f32 here but ParseOptions declares it bf16");
}

TEST(ParseErrors, TypeErrorsFromTheBuildersCarryThePosition) {
  EXPECT_EQ(error_of("!score"),
            "line 1, column 1: 'not': expects a bool operand, got f32 (compare it first, e.g. x != 0)");
  EXPECT_EQ(error_of("q < kv && q"), "line 1, column 8: 'and': expects bool operands, got bool and i32");
  EXPECT_EQ(error_of("(q < kv) + true"), "line 1, column 10: 'add': not defined for two bools (use && / || or cast first)");
  EXPECT_EQ(error_of("score +\n where(score, 1, 2)"), "line 2, column 2: 'where': the condition must be bool, got f32");
  EXPECT_EQ(error_of("q < kv ? 1 : 2 + -true"), "line 1, column 18: 'neg': not defined for bool (cast to a number first)");
  EXPECT_EQ(error_of("x{f16}"), "line 1, column 1: scalar 'x': type must be bool, i32, i64 or f32, got f16");
}

TEST(ParseErrors, ChainedComparisonsAreRefused) {
  EXPECT_EQ(error_of("0 <= q < kv"),
            "line 1, column 8: expected an operator other than a comparison, found '<' (chained comparisons are "
            "ambiguous: add parentheses)");
  EXPECT_EQ(error_of("q == kv == true").substr(0, 70),
            "line 1, column 9: expected an operator other than a comparison, found ");
  EXPECT_EQ(error_of("(0 <= q) == (q < kv)"), "(no error)");
}

TEST(ParseErrors, Numbers) {
  EXPECT_EQ(error_of("score * 3i32"), "line 1, column 9: expected a number, found malformed number '3i32'");
  EXPECT_EQ(error_of("1e"), "line 1, column 1: expected a number, found malformed number '1e'");
  EXPECT_EQ(error_of("1.2.3"), "line 1, column 1: expected a number, found malformed number '1.2.3'");
  EXPECT_EQ(error_of("1e999"), "line 1, column 1: expected a number that fits in a double, found number '1e999'");
  EXPECT_EQ(error_of("99999999999999999999"),
            "line 1, column 1: expected an integer that fits in i64, found number '99999999999999999999' (write it "
            "with a '.' for a float)");
  // Past 2^53 a literal (a double) rounds: 9007199254740993 was read as ...992 without a word.
  EXPECT_EQ(error_of("kv_idx <= 9007199254740993 - 9007199254740992"),
            "line 1, column 11: integer literal number '9007199254740993' is not exactly a double, which literals hold "
            "(every integer up to 2^53 is)");
  EXPECT_EQ(error_of("kv_idx + 9223372036854775807 > 0"),
            "line 1, column 10: integer literal number '9223372036854775807' is not exactly a double, which literals "
            "hold (every integer up to 2^53 is)");
  EXPECT_EQ(error_of("kv_idx <= 9007199254740992 - 9007199254740991"), "(no error)");
  // Below -2^63 the value rounded to -2^63, which fits i64: it was taken silently (and the next integers too).
  EXPECT_EQ(error_of("score + i64(-9223372036854775809 == -9223372036854775808)"),
            "line 1, column 14: expected an integer that fits in i64, found number '9223372036854775809' (write it "
            "with a '.' for a float)");
  EXPECT_EQ(error_of("-9223372036854776000"),
            "line 1, column 2: expected an integer that fits in i64, found number '9223372036854776000' (write it "
            "with a '.' for a float)");
  EXPECT_EQ(error_of("-9223372036854775808 + kv_idx"), "(no error)");  // -2^63 itself: exact and in range
  EXPECT_EQ(error_of("9223372036854775808"),
            "line 1, column 1: expected an integer that fits in i64, found number '9223372036854775808' (write it "
            "with a '.' for a float)");
  // Any size is checked for exactness, annotated as a float too (past 2^63 every value counted as exact).
  EXPECT_EQ(error_of("18446744073709551617{f32}"),
            "line 1, column 1: integer literal number '18446744073709551617' is not exactly a double, which literals "
            "hold (every integer up to 2^53 is)");
  EXPECT_EQ(error_of("18446744073709551616{f32} + score"), "(no error)");  // 2^64: exact
  EXPECT_EQ(error_of("0x10"), "line 1, column 1: expected an expression, found hexadecimal number '0x10'");
  EXPECT_EQ(error_of("0x"), "line 1, column 1: expected a number, found malformed number '0x'");
}

TEST(ParseErrors, LiteralAnnotations) {
  EXPECT_EQ(error_of("2.5{i32}"), "line 1, column 1: expected an integer in the range of i32, found '2.5'");
  EXPECT_EQ(error_of("-3000000000{i32}"), "line 1, column 2: expected an integer in the range of i32, found '-3000000000'");
  EXPECT_EQ(error_of("inf{i64}"), "line 1, column 1: expected an integer in the range of i64, found 'inf'");
  EXPECT_EQ(error_of("2{bool}"), "line 1, column 1: expected 0, 1, true or false for a bool literal, found '2'");
  EXPECT_EQ(error_of("1{f64}"), "line 1, column 1: expected a literal type bool, i32, i64 or f32, found f64, found '1'");
  EXPECT_EQ(error_of("1{}"), "line 1, column 3: expected a dtype (bool, i32, i64, f32, ...), found '}'");
  EXPECT_EQ(error_of("1{int8}"), "line 1, column 3: expected a dtype (bool, i32, i64, f32, ...), found 'int8'");
  EXPECT_EQ(error_of("1{i32, strong}"), "line 1, column 8: expected 'weak', found 'strong'");
  EXPECT_EQ(error_of("1{i32"), "line 1, column 6: expected '}', found end of input");
  EXPECT_EQ(error_of("alpha{i32, weak}"), "line 1, column 12: expected '}', found 'weak'");
  EXPECT_EQ(error_of("score{f32}"),
            "line 1, column 6: expected an operator after 'score', found '{' (type annotations apply to numbers, "
            "scalars and buffers)");
  ParseOptions opt;
  opt.scalar_types["alpha"] = DType::I32;
  EXPECT_EQ(error_of("alpha{f32}", opt),
            "line 1, column 1: scalar 'alpha' is annotated f32 here but ParseOptions declares it i32");
}

TEST(ParseErrors, KeywordsAndBindings) {
  EXPECT_EQ(error_of("and"), "line 1, column 1: expected an expression, found 'and'");
  EXPECT_EQ(error_of("q < kv or"), "line 1, column 10: expected an expression, found end of input");
  EXPECT_EQ(error_of("score = 1; score"), "line 1, column 1: expected a binding name, found reserved name 'score'");
  EXPECT_EQ(error_of("x = 1;\nx = 2; x"), "line 2, column 1: 'x' is already bound at line 1, column 1");
  EXPECT_EQ(error_of("x = 1 x"), "line 1, column 7: expected ';', found 'x'");
  EXPECT_EQ(error_of("x = 1;"), "line 1, column 7: expected an expression, found end of input");
  EXPECT_EQ(error_of("score = = 1"), "line 1, column 1: expected a binding name, found reserved name 'score'");
}

TEST(ParseErrors, RawNodes) {
  EXPECT_EQ(error_of("@foo{f32}()"), "line 1, column 2: expected an IR op name after '@', found 'foo'");
  EXPECT_EQ(error_of("@add(score, score)"), "line 1, column 5: expected '{', found '('");
  EXPECT_EQ(error_of("@add{f32}(score)"), "line 1, column 1: internal: 'add' takes 2 operands, got 1");
  EXPECT_EQ(error_of("@literal{f32}()"), "line 1, column 15: expected a number or 0x bits, found ')'");
  EXPECT_EQ(error_of("@literal{f32}(0x12345678901234567)"),
            "line 1, column 15: expected at most 16 hex digits, found hexadecimal number '0x12345678901234567'");
  EXPECT_EQ(error_of("@scalar{f32}(1)"), "line 1, column 14: expected a name, found number '1'");
  EXPECT_EQ(error_of("@scalar{f32}(\"ab"), "line 1, column 14: expected '\"' to close the string, found end of input");
  EXPECT_EQ(error_of("@scalar{f32}(\"a\\qb\")"), "line 1, column 16: expected an escape \\\" \\\\ or \\xHH, found '\\q'");
}

TEST(ParseErrors, StrayCharacters) {
  EXPECT_EQ(error_of("score $ 1"), "line 1, column 7: expected a token, found '$'");
  EXPECT_EQ(error_of("score \x01"), "line 1, column 7: expected a token, found byte 0x01");
  EXPECT_EQ(error_of(std::string("score\0", 6)), "line 1, column 6: expected a token, found byte 0x00");
  EXPECT_EQ(error_of("score ^ 2"), "line 1, column 7: expected a token, found '^': the text form has no xor operator; "
                                   "write a != b for bools, (a | b) - (a & b) for integers, a ** b for a power");
  // '&' / '|' on a float named the node ('and': expects bool operands), not the operator and its two meanings
  EXPECT_EQ(error_of("score & 1"), "line 1, column 7: '&' expects two bools (logical) or two integers (bitwise), got "
                                   "f32 and i64");
  EXPECT_EQ(error_of("score | q_idx"), "line 1, column 7: '|' expects two bools (logical) or two integers (bitwise), "
                                       "got f32 and i32");
}

TEST(ParseErrors, DeepNestingIsAnErrorNotACrash) {
  const std::string deep_parens = std::string(100000, '(') + "score" + std::string(100000, ')');
  EXPECT_EQ(error_of(deep_parens), "line 1, column 130: expected at most 128 levels of nesting (parentheses; a "
                                   "prefix operator, '?:' branch or '**' exponent counts half a level), found more");
  // exactly 128 parentheses parse (the limit counted two levels per parenthesis and failed at 128 of 256 "levels")
  EXPECT_EQ(error_of(std::string(128, '(') + "score" + std::string(128, ')')), "(no error)");
  EXPECT_NE(error_of(std::string(129, '(') + "score" + std::string(129, ')')).find("at most 128"), std::string::npos);
  EXPECT_NE(error_of(std::string(100000, '-') + "score").find("levels of nesting"), std::string::npos);
  EXPECT_NE(error_of(std::string(100000, '!') + "true").find("levels of nesting"), std::string::npos);
  std::string pow_chain = "score";
  for (int i = 0; i < 100000; ++i) pow_chain += " ** score";
  EXPECT_NE(error_of(pow_chain).find("levels of nesting"), std::string::npos);
  std::string ternary = "";
  for (int i = 0; i < 100000; ++i) ternary += "q < kv ? score : ";
  EXPECT_NE(error_of(ternary + "score").find("levels of nesting"), std::string::npos);
  // Moderate nesting is fine.
  EXPECT_EQ(error_of(std::string(100, '(') + "score" + std::string(100, ')')), "(no error)");
}

// Mutated mods (tokens inserted, spans cut, bytes replaced, pieces of other mods spliced in): every text either
// parses, and then prints to a text that parses to the same node and goes through verify, simplify, the position
// analysis and the derivative, or fails with flexattn::Error; never another exception (and, in the sanitizer build
// of `make test`, never a memory or undefined-behaviour report). Session 25 ran 600,000 such texts under ASan + UBSan
// clean; this is a seeded 20,000 of them.
TEST(ParseErrors, MutatedModsParseOrFailCleanly) {
  const std::vector<std::string> seeds = {
      "score", "q_idx >= kv_idx", "30.0 * tanh(score / 30.0)", "score + bias[h, q_idx - kv_idx + S - 1]",
      "doc{i32}[q_idx] == doc{i32}[kv_idx]", "(q_idx - kv_idx) % 3 == 0 && q_idx >= kv_idx",
      "where(q < kv, score, -score)", "score + (kv_idx - q_idx) * exp2(-8.0 * (h + 1) / H)",
      "q_idx // 64 == kv_idx // 64", "kv_idx < 70 || q_idx >= kv_idx", "score * sigmoid(score) + log(abs(score) + 1e-6)",
      "min(max(score, -5.0), 5.0) ** 2", "q_idx - kv_idx <= W && q_idx >= kv_idx", "x = score * 2\nx + x",
      "f32(q_idx) * 0.5 + rsqrt(f32(kv_idx) + 1.0)", "bool(q_idx) ? score : 0.0", "pow(score, 3) - floor(score)"};
  const std::vector<std::string> tokens = {
      "score", "q_idx", "kv_idx", "b", "h", "(", ")", "[", "]", ",", "+", "-", "*", "/", "//", "%", "**", "<", "<=",
      "==", "!=", "&&", "||", "!", "?", ":", "tanh(", "exp(", "where(", "i32(", "f32(", "bool(", "i64(", "bias[",
      "1e308", "1e-45", "0", "-2147483648", "9223372036854775808", "0x7fffffff", "nan", "inf", "\n", "#", " ", "=",
      "&", "|", "^", "<<", ">>", "~", "min(", "max(", ".", "1.", ".5", "{i64}", "@", "\"", "\\", "\xff"};
  std::mt19937 rng(25);
  int parsed = 0;
  for (int it = 0; it < 20000; ++it) {
    std::string s = seeds[rng() % seeds.size()];
    for (int m = 1 + int(rng() % 6); m > 0; --m) {
      const size_t pos = rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: s.insert(pos, tokens[rng() % tokens.size()]); break;
        case 1: if (pos < s.size()) s.erase(pos, 1 + rng() % 4); break;
        case 2: if (pos < s.size()) s[pos] = char(32 + rng() % 95); break;
        default: {
          const std::string& o = seeds[rng() % seeds.size()];
          s.insert(pos, o.substr(rng() % (o.size() + 1), rng() % 12));
        }
      }
    }
    try {
      const Expr e = parse(s);
      ++parsed;
      ASSERT_EQ(parse(print(e)).get(), e.get()) << s << "\nprints as\n" << print(e);
      // Each pass on its own: a mod that is not a valid score_mod still goes through the others.
      const auto may_refuse = [](auto&& pass) {
        try {
          pass();
        } catch (const Error&) {
        }
      };
      may_refuse([&] { verify(e, "score_mod"); });
      may_refuse([&] { (void)simplify(e); });
      may_refuse([&] { (void)position_dependence(e); });
      may_refuse([&] { (void)differentiate(e, {"bias"}); });
    } catch (const Error&) {
    } catch (const std::exception& x) {
      FAIL() << "not a flexattn::Error (" << x.what() << ") for: " << s;
    }
  }
  EXPECT_GT(parsed, 1000);  // the mutations leave enough valid mods to exercise the passes
}

}  // namespace
}  // namespace flexattn::ir
