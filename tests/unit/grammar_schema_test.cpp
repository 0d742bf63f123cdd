// JSON Schema -> GBNF (engine/grammar/json_schema): what each keyword allows and refuses,
// checked by matching texts against the compiled grammar, and the errors that name the
// unsupported keyword and where it is (the server's 400).
#include <gtest/gtest.h>

#include "engine/grammar/compiled_grammar.h"
#include "tests/unit/json_schema_check.h"

namespace tandem::grammar {
namespace {

using test::accepts;
using test::error_of;
using test::tiny_vocab;

TEST(GrammarSchema, ObjectsPropertiesRequired) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
                            "required":["b"]})";
  EXPECT_TRUE(accepts(s, R"({"b":"x"})"));
  EXPECT_TRUE(accepts(s, R"({"a":-12,"b":""})"));
  EXPECT_TRUE(accepts(s, "{ \"a\" : 0 ,\n  \"b\" : \"\\u00e9\\n\" }"));
  EXPECT_FALSE(accepts(s, R"({"a":1})"));           // b is required
  EXPECT_FALSE(accepts(s, R"({"b":"x","a":1})"));   // declared order
  EXPECT_FALSE(accepts(s, R"({"b":"x","c":1})"));   // no others unless additionalProperties says so
  EXPECT_FALSE(accepts(s, R"({"a":01,"b":"x"})"));  // no leading zero
  EXPECT_FALSE(accepts(s, "{\"b\":\"\x01\"}"));     // control characters must be escaped
  EXPECT_FALSE(accepts(s, R"({"b":"\ud800"})"));    // no lone surrogates
}

TEST(GrammarSchema, AdditionalPropertiesNeverRepeatADeclaredKey) {
  const std::string s = R"({"type":"object","properties":{"id":{"type":"integer"}},
                            "additionalProperties":{"type":"boolean"}})";
  EXPECT_TRUE(accepts(s, R"({"id":1,"i":true,"idx":false,"":true})"));
  EXPECT_TRUE(accepts(s, R"({"other":true})"));
  EXPECT_FALSE(accepts(s, R"({"id":1,"id":true})"));
  EXPECT_FALSE(accepts(s, R"({"id":1,"x":2})"));
  EXPECT_TRUE(accepts(R"({"type":"object"})", R"({"any":[1,{"x":null}],"b":"c"})"));
}

TEST(GrammarSchema, ArraysEnumsConstsNumbers) {
  const std::string a = R"({"type":"array","items":{"enum":["a",1,null]},"minItems":1,"maxItems":2})";
  EXPECT_TRUE(accepts(a, R"(["a"])"));
  EXPECT_TRUE(accepts(a, R"([1, null])"));
  EXPECT_FALSE(accepts(a, "[]"));
  EXPECT_FALSE(accepts(a, R"([1,1,1])"));
  EXPECT_FALSE(accepts(a, R"(["b"])"));
  EXPECT_TRUE(accepts(R"({"const":{"k":[true]}})", R"({"k":[true]})"));
  const std::string r = R"({"type":"integer","minimum":-15,"maximum":120})";
  for (int v = -30; v <= 150; ++v) EXPECT_EQ(accepts(r, std::to_string(v)), v >= -15 && v <= 120) << v;
  const std::string x = R"({"type":"integer","exclusiveMinimum":0})";
  EXPECT_FALSE(accepts(x, "0"));
  EXPECT_TRUE(accepts(x, "1"));
  EXPECT_TRUE(accepts(x, "123456789012"));
  const std::string n = R"({"type":"number","minimum":-90,"maximum":90})";
  EXPECT_TRUE(accepts(n, "-89.999"));
  EXPECT_TRUE(accepts(n, "90.000"));
  EXPECT_FALSE(accepts(n, "90.001"));
  EXPECT_FALSE(accepts(n, "-91"));
  EXPECT_FALSE(accepts(n, "1e3"));
  EXPECT_TRUE(accepts(R"({"type":"number"})", "-0.5E+12"));
}

TEST(GrammarSchema, StringsAndFormats) {
  const std::string s = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_FALSE(accepts(s, R"("a")"));
  EXPECT_TRUE(accepts(s, R"("\u00e9\n")"));
  EXPECT_TRUE(accepts(s, "\"\xc3\xa9\xc3\xa9\xc3\xa9\""));
  EXPECT_FALSE(accepts(s, R"("abcd")"));
  const std::string d = R"({"type":"string","format":"date"})";
  EXPECT_TRUE(accepts(d, R"("2024-02-28")"));
  EXPECT_FALSE(accepts(d, R"("2024-02-30")"));
  EXPECT_FALSE(accepts(d, R"("2024-04-31")"));
  EXPECT_TRUE(accepts(R"({"format":"date-time"})", R"("2024-12-31T23:59:59.5+01:00")"));
  EXPECT_TRUE(accepts(R"({"format":"uuid"})", R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(R"({"format":"ipv4"})", R"("256.1.1.1")"));
}

TEST(GrammarSchema, RefsAnyOfOneOf) {
  const std::string t = R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})";
  EXPECT_TRUE(accepts(t, R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"));
  EXPECT_FALSE(accepts(t, R"({"v":1,"kids":[{}]})"));
  const std::string o = R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},
                                     {"type":"object","properties":{"k":{"const":"b"},"x":{"type":"integer"}},
                                      "required":["k","x"]}]})";
  EXPECT_TRUE(accepts(o, R"({"k":"b","x":1})"));
  EXPECT_FALSE(accepts(o, R"({"k":"a","x":1})"));
  EXPECT_TRUE(accepts(R"({"anyOf":[{"type":"string"},{"type":"null"}]})", "null"));
}

TEST(GrammarSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"tags":{"type":"object","patternProperties":{}}}})"),
            "json_schema: unsupported keyword 'patternProperties' at #/properties/tags");
  EXPECT_EQ(error_of(R"x({"type":"string","pattern":"^a(?=b)"})x"),
            "json_schema: pattern '^a(?=b)': lookahead '(?=' is not supported at #/pattern");
  EXPECT_EQ(error_of(R"({"type":"array","items":{"type":"integer","multipleOf":3}})"),
            "json_schema: unsupported keyword 'multipleOf' at #/items");
  EXPECT_EQ(error_of(R"({"type":"array","uniqueItems":true})"), "json_schema: unsupported keyword 'uniqueItems' at #");
  EXPECT_EQ(error_of(R"({"type":"string","format":"hostname"})"),
            "json_schema: unsupported format 'hostname' at #/format");
  EXPECT_EQ(error_of(R"({"$ref":"http://example.com/s.json"})"),
            "json_schema: $ref 'http://example.com/s.json' is not local to the schema (only \"#...\") at #");
  EXPECT_EQ(error_of(R"({"$ref":"#/$defs/missing"})"), "json_schema: $ref '#/$defs/missing' points at nothing at #");
  EXPECT_EQ(error_of(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})"),
            "json_schema: oneOf branches 0 and 1 may both match one value (not supported: use anyOf, or tell them "
            "apart by type or a const property) at #/oneOf");
  EXPECT_EQ(error_of(R"({"type":"array","maxItems":100000})"),
            "json_schema: maxItems above 4096 is not supported at #");
  EXPECT_EQ(error_of("{not json"), "json_schema: not JSON (syntax error)");
  EXPECT_EQ(error_of(R"({"type":"strin"})"), "json_schema: unknown type 'strin' at #/type");
}

TEST(GrammarCache, CompilesOncePerSchema) {
  grammar_cache cache(tiny_vocab(), 2);
  auto a = cache.get(grammar_kind::json_schema, R"({"type":"integer"})");
  auto b = cache.get(grammar_kind::json_schema, R"({"type":"integer"})");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(cache.hits(), 1u);
  (void)cache.get(grammar_kind::gbnf, "root ::= \"x\"");
  (void)cache.get(grammar_kind::json_object, "");
  auto c = cache.get(grammar_kind::json_schema, R"({"type":"integer"})");  // evicted: compiled again
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(cache.misses(), 4u);
  EXPECT_THROW(cache.get(grammar_kind::gbnf, "root ::= nope"), grammar_error);
}

}  // namespace
}  // namespace tandem::grammar
