// JSON Schema `pattern` (engine/grammar/regex): what each regular-expression feature lets
// through as a JSON string (the text between quotes is JSON, so " \ and control characters
// arrive escaped), the features refused by name, minLength/maxLength beside a pattern, and
// propertyNames.
#include <gtest/gtest.h>

#include "engine/grammar/regex.h"
#include "tests/unit/json_schema_check.h"

namespace tandem::grammar {
namespace {

using test::accepts;
using test::error_of;

std::string pattern_schema(const std::string& pattern, const std::string& more = "") {
  std::string escaped;
  for (char c : pattern) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  return R"({"type":"string","pattern":")" + escaped + "\"" + more + "}";
}

bool matches(const std::string& pattern, std::string_view json_text, const std::string& more = "") {
  return accepts(pattern_schema(pattern, more), json_text);
}

TEST(GrammarRegex, LiteralsClassesQuantifiers) {
  EXPECT_TRUE(matches(R"(^[A-Z]{2}-\d{4}$)", R"("AB-1234")"));
  EXPECT_FALSE(matches(R"(^[A-Z]{2}-\d{4}$)", R"("ab-1234")"));
  EXPECT_FALSE(matches(R"(^[A-Z]{2}-\d{4}$)", R"("AB-123")"));
  EXPECT_TRUE(matches(R"(^(red|green|blue)$)", R"("green")"));
  EXPECT_FALSE(matches(R"(^(red|green|blue)$)", R"("greenblue")"));
  EXPECT_TRUE(matches(R"(^a\.b$)", R"("a.b")"));
  EXPECT_FALSE(matches(R"(^a\.b$)", R"("axb")"));
  EXPECT_TRUE(matches(R"(^[^,]+$)", R"("a;b")"));
  EXPECT_FALSE(matches(R"(^[^,]+$)", R"("a,b")"));
  EXPECT_TRUE(matches(R"(^x{2,}$)", R"("xxxxx")"));
  EXPECT_FALSE(matches(R"(^x{2,}$)", R"("x")"));
  EXPECT_TRUE(matches(R"(^a+?b??c*$)", R"("aaacc")"));
  EXPECT_TRUE(matches(R"(^(?:ab)+(?<tail>c)?$)", R"("ababc")"));
  EXPECT_TRUE(matches(R"(^\w+@\w+\.(com|org)$)", R"("joe_1@site.org")"));
  EXPECT_TRUE(matches(R"(^[\d\s]+$)", R"("1 2\t3")"));  // \t: a tab, written as JSON's \t
  EXPECT_TRUE(matches(R"(^\u00e9+\x41{1}$)",
                      "\"\xC3\xA9\xC3\xA9"
                      "A\""));
  EXPECT_TRUE(matches(R"(^a{b$)", R"("a{b")"));  // a '{' that is no quantifier is itself
  // Anchored to the whole string, with or without ^ and $.
  EXPECT_TRUE(matches(R"(\d+)", R"("123")"));
  EXPECT_FALSE(matches(R"(\d+)", R"("a123")"));
  EXPECT_TRUE(matches(R"(^ab|^cd$)", R"("cd")"));
}

TEST(GrammarRegex, CharactersAreWrittenAsJsonEscapes) {
  EXPECT_TRUE(matches(R"(^a"b\\c$)", R"("a\"b\\c")"));
  EXPECT_FALSE(matches(R"(^a"b\\c$)", R"("a"b\c")"));
  EXPECT_TRUE(matches(R"(^\t\n$)", R"("\t\n")"));
  EXPECT_TRUE(matches(R"(^\x01$)", R"("\u0001")"));
  EXPECT_TRUE(matches(R"(^.{2}$)", "\"\xC3\xA9!\""));
  EXPECT_FALSE(matches(R"(^.$)", R"("\n")"));  // '.' is no line terminator
  EXPECT_TRUE(matches(R"(^[^a]$)", R"("\"")"));
}

TEST(GrammarRegex, UnsupportedFeaturesAreNamed) {
  auto err = [](const std::string& p) { return error_of(pattern_schema(p)); };
  EXPECT_EQ(err("(?=a)a"), "json_schema: pattern '(?=a)a': lookahead '(?=' is not supported at #/pattern");
  EXPECT_EQ(err("(?<!a)b"), "json_schema: pattern '(?<!a)b': lookbehind '(?<!' is not supported at #/pattern");
  EXPECT_EQ(err(R"((a)\1)"), R"(json_schema: pattern '(a)\1': the backreference '\1' is not supported at #/pattern)");
  EXPECT_EQ(err(R"(\bx)"), R"(json_schema: pattern '\bx': the word boundary '\b' is not supported at #/pattern)");
  EXPECT_EQ(err(R"(\p{L}+)"),
            R"(json_schema: pattern '\p{L}+': the Unicode property escape '\p' is not supported at #/pattern)");
  EXPECT_EQ(err("a^b"),
            "json_schema: pattern 'a^b': the anchor '^' inside the pattern is not supported (only at "
            "its start) at #/pattern");
  EXPECT_EQ(err("(ab"), "json_schema: pattern '(ab': unclosed '(' at #/pattern");
  EXPECT_EQ(err("ab)"), "json_schema: pattern 'ab)': unbalanced ')' at #/pattern");
  EXPECT_EQ(err("*a"), "json_schema: pattern '*a': nothing to repeat before '*' at #/pattern");
  EXPECT_EQ(err("a{5000}"),
            "json_schema: pattern 'a{5000}': quantifier count above 4096 is not supported at #/pattern");
  EXPECT_EQ(err(std::string(65, '(') + "a" + std::string(65, ')')).substr(0, 30), "json_schema: pattern '((((((((");
  EXPECT_NE(err(std::string(65, '(') + "a" + std::string(65, ')')).find("groups nested deeper than 64"),
            std::string::npos);
  EXPECT_EQ(err(std::string(60, '(') + "a" + std::string(60, ')')), "");
  EXPECT_EQ(error_of(R"({"type":"string","pattern":"a","format":"date"})"),
            "json_schema: pattern beside format is not supported at #");
}

TEST(GrammarRegex, LengthsBesideAPattern) {
  const std::string ident = R"(^[a-z][a-z0-9_]*$)";
  EXPECT_TRUE(matches(ident, R"("ab_1")", R"(,"maxLength":4)"));
  EXPECT_FALSE(matches(ident, R"("ab_12")", R"(,"maxLength":4)"));
  EXPECT_FALSE(matches(ident, R"("a")", R"(,"minLength":2)"));
  EXPECT_TRUE(matches(ident, R"("ab")", R"(,"minLength":2)"));
  EXPECT_TRUE(matches(R"(^\d{3}$)", R"("123")", R"(,"maxLength":5)"));  // implied by the pattern
  EXPECT_EQ(error_of(pattern_schema("^(ab)+$", R"(,"maxLength":4)")),
            "json_schema: pattern '^(ab)+$': minLength/maxLength beside a pattern are supported when the pattern "
            "implies them or has one repeated character class to bound at #/pattern");
  EXPECT_EQ(error_of(pattern_schema(R"(^\d{3}$)", R"(,"maxLength":2)")),
            R"(json_schema: pattern '^\d{3}$': no string matches the pattern within minLength/maxLength at #/pattern)");
}

TEST(GrammarRegex, PropertyNames) {
  const std::string map = R"({"type":"object","additionalProperties":{"type":"integer"},
                              "propertyNames":{"pattern":"^[a-z]{1,8}$"}})";
  EXPECT_TRUE(accepts(map, R"({"abc": 1, "de": 2})"));
  EXPECT_FALSE(accepts(map, R"({"Abc": 1})"));
  EXPECT_TRUE(accepts(map, "{}"));
  EXPECT_TRUE(accepts(R"({"type":"object","propertyNames":{"maxLength":2}})", R"({"ab": [1]})"));
  EXPECT_FALSE(accepts(R"({"type":"object","propertyNames":{"maxLength":2}})", R"({"abc": [1]})"));
  EXPECT_TRUE(accepts(R"({"type":"object","propertyNames":false})", "{}"));
  EXPECT_FALSE(accepts(R"({"type":"object","propertyNames":false})", R"({"a": 1})"));
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"a":{}},"propertyNames":{"pattern":"^a$"}})"),
            "json_schema: propertyNames beside properties or required is not supported at #");
  EXPECT_EQ(error_of(R"({"type":"object","propertyNames":{"type":"integer"}})"),
            "json_schema: propertyNames must allow strings only at #/propertyNames");
}

}  // namespace
}  // namespace tandem::grammar
