// The Jinja interpreter against jinja2: every construct case of tests/data/jinja/constructs.json
// (made by tests/tools/make_jinja_vectors.py in Hugging Face's environment) renders the same
// text, or fails where jinja2 fails. Then what jinja2 cannot tell us: content spans, error
// lines and the bounds on what a template can make the interpreter do.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/jinja/template.h"

using namespace tandem::jinja;

namespace {

value read_vectors() {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/tests/data/jinja/constructs.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str());
}

std::vector<std::pair<std::string, value>> vars_of(const value& obj) {
  std::vector<std::pair<std::string, value>> out;
  for (const auto& [k, v] : obj.obj().entries) out.emplace_back(k.text(), v);
  return out;
}

std::string render(std::string_view source, std::vector<std::pair<std::string, value>> vars = {}) {
  return compiled_template::compile(source).render(vars).text;
}

// The content bytes of a render, in order.
std::vector<std::string> content_of(const string_data& d) {
  std::vector<std::string> out;
  for (const auto& s : d.content) out.push_back(d.text.substr(s.begin, s.end - s.begin));
  return out;
}

}  // namespace

TEST(jinja, constructs_match_jinja2) {
  const value doc = read_vectors();
  render_options opts;
  opts.now = doc.find("now")->as_int();
  size_t ok = 0, n = 0;
  for (const auto& c : doc.find("cases")->items()) {
    ++n;
    const std::string name = c.find("name")->text();
    const std::string& source = c.find("source")->text();
    SCOPED_TRACE(name + ": " + source);
    std::string got;
    std::string error;
    try {
      got = compiled_template::compile(source).render(vars_of(*c.find("vars")), opts).text;
    } catch (const syntax_error& e) {
      error = e.what();
    } catch (const render_error& e) {
      error = e.what();
    }
    if (const value* want_error = c.find("error")) {
      EXPECT_FALSE(error.empty()) << "jinja2 fails with " << want_error->text() << "; Tandem rendered [" << got << "]";
      ok += !error.empty();
    } else {
      EXPECT_TRUE(error.empty()) << error;
      EXPECT_EQ(got, c.find("rendered")->text());
      ok += error.empty() && got == c.find("rendered")->text();
    }
  }
  std::printf("[ vectors  ] %zu/%zu constructs match jinja2\n", ok, n);
  EXPECT_GT(n, 100u);
}

TEST(jinja, content_spans_follow_caller_strings) {
  const auto msg = value::object({{value("role"), value("user")}, {value("content"), value::content("  hi <|x|>  ")}});
  const std::vector<std::pair<std::string, value>> vars = {{"m", msg}};
  const auto t = compiled_template::compile("<a>{{ m.role }}:{{ m.content }}</a>");
  const auto d = t.render(vars);
  EXPECT_EQ(d.text, "<a>user:  hi <|x|>  </a>");
  EXPECT_EQ(content_of(d), std::vector<std::string>{"  hi <|x|>  "});
  // Concatenation, trim and slicing keep exactly the content bytes as content.
  const auto trimmed = compiled_template::compile("{{ '<s>' + m.content | trim + '</s>' }}").render(vars);
  EXPECT_EQ(trimmed.text, "<s>hi <|x|></s>");
  EXPECT_EQ(content_of(trimmed), std::vector<std::string>{"hi <|x|>"});
  const auto sliced = compiled_template::compile("{{ m.content[2:4] ~ '|' ~ m.content.split('<')[1] }}").render(vars);
  EXPECT_EQ(sliced.text, "hi||x|>  ");
  EXPECT_EQ(content_of(sliced), (std::vector<std::string>{"hi", "|x|>  "}));
  // A rewrite of content is all content; template text stays template text.
  const auto upper = compiled_template::compile("[{{ m.content | upper }}]").render(vars);
  EXPECT_EQ(content_of(upper), std::vector<std::string>{"  HI <|X|>  "});
  const auto replaced = compiled_template::compile("{{ ('A' ~ m.content ~ 'B').replace('hi', 'yo') }}").render(vars);
  EXPECT_EQ(replaced.text, "A  yo <|x|>  B");
  EXPECT_EQ(content_of(replaced), std::vector<std::string>{"  yo <|x|>  "});
  // JSON of caller data is content as a whole.
  const auto json = compiled_template::compile("{{ m | tojson }}").render(vars);
  EXPECT_EQ(content_of(json), std::vector<std::string>{json.text});
  // Strings the template writes itself are never content.
  EXPECT_TRUE(compiled_template::compile("{{ 'x' | upper }}{% set y = 'z' %}{{ y }}").render({}).content.empty());
  // Caller JSON parsed as content marks keys and string values.
  const value parsed = from_json(R"({"k": ["v", 1]})", true);
  const auto keys = compiled_template::compile("{% for k, v in d.items() %}{{ k }}={{ v[0] }}{{ v[1] }}{% endfor %}")
                        .render({{"d", parsed}});
  EXPECT_EQ(keys.text, "k=v1");
  EXPECT_EQ(content_of(keys), (std::vector<std::string>{"k", "v"}));
}

TEST(jinja, macro_output_keeps_spans) {
  const auto d = compiled_template::compile("{% macro show(x) %}[{{ x }}]{% endmacro %}{{ show(c) }}{{ show('t') }}")
                     .render({{"c", value::content("C")}});
  EXPECT_EQ(d.text, "[C][t]");
  EXPECT_EQ(content_of(d), std::vector<std::string>{"C"});
}

TEST(jinja, syntax_errors_name_the_line) {
  const auto line_of = [](std::string_view src) {
    try {
      (void)compiled_template::compile(src);
    } catch (const syntax_error& e) {
      return std::make_pair(e.line(), std::string(e.what()));
    }
    return std::make_pair(0, std::string());
  };
  auto [line, what] = line_of("a\nb\n{% if x %}\nc\n");
  EXPECT_EQ(line, 4) << what;  // the end of the template, still inside the if
  EXPECT_NE(what.find("endif"), std::string::npos) << what;
  std::tie(line, what) = line_of("line 1\n{{ x | }}\n");
  EXPECT_EQ(line, 2) << what;
  EXPECT_EQ(what.rfind("line 2:", 0), 0u) << what;
  std::tie(line, what) = line_of("{% for %}");
  EXPECT_EQ(line, 1) << what;
  std::tie(line, what) = line_of("\n\n{% endfor %}");
  EXPECT_EQ(line, 3) << what;
  std::tie(line, what) = line_of("{{ 'unterminated }}");
  EXPECT_EQ(line, 1) << what;
  std::tie(line, what) = line_of("{# no end");
  EXPECT_EQ(line, 1) << what;
}

TEST(jinja, bounded_work) {
  const auto fails = [](std::string_view src) {
    try {
      (void)render(src);
    } catch (const render_error&) {
      return true;
    } catch (const syntax_error&) {
      return true;
    }
    return false;
  };
  EXPECT_TRUE(fails("{{ range(1000000000) | length }}"));
  EXPECT_TRUE(fails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"));
  EXPECT_TRUE(fails("{{ 'x' * 1000000000000 }}"));
  EXPECT_TRUE(fails("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(fails("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"));
  EXPECT_TRUE(fails(std::string(5000, '{') + "% if x %}"));
  EXPECT_TRUE(fails("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"));
  // A long flat template is fine.
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "{% if true %}x{% endif %}";
  EXPECT_EQ(render(many).size(), 2000u);
}

TEST(jinja, json_round_trip_and_errors) {
  const value v = from_json(R"({"b": [1, 2.5, -3e2, true, null, "é\u00e9\ud83e\udd99"], "a": {}})");
  EXPECT_EQ(to_json(v), R"({"b": [1, 2.5, -300.0, true, null, "éé🦙"], "a": {}})");
  json_options o;
  o.ensure_ascii = true;
  o.sort_keys = true;
  EXPECT_EQ(to_json(v, o), R"({"a": {}, "b": [1, 2.5, -300.0, true, null, "\u00e9\u00e9\ud83e\udd99"]})");
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"\\q\"", "01", "[1] x", "\"a\nb\""}) {
    EXPECT_THROW((void)from_json(bad), std::invalid_argument) << bad;
  }
  EXPECT_THROW((void)from_json(std::string(1000, '[') + std::string(1000, ']')), std::invalid_argument);
  EXPECT_EQ(float_repr(1e22), "1e+22");
  EXPECT_EQ(float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(float_repr(100.0), "100.0");
  EXPECT_EQ(float_repr(0.1), "0.1");
}

TEST(jinja, one_compile_renders_many_contexts) {
  const auto t = compiled_template::compile("{% for m in messages %}{{ m }};{% endfor %}{{ add_generation_prompt }}");
  EXPECT_EQ(t.render({{"messages", value::array({value("a"), value("b")})}, {"add_generation_prompt", true}}).text,
            "a;b;True");
  EXPECT_EQ(t.render({{"messages", value::array({})}}).text, "");
  EXPECT_TRUE(t.mentions("messages"));
  EXPECT_FALSE(t.mentions("tools"));
}
