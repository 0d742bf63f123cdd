// One rule per schema node that needs one, named after its place in the schema; shared
// pieces (string, number, any value, whitespace) once each. Strings are one rule with the
// character class inline, so the mask's per-state tables cover a whole string.
#include "engine/grammar/json_schema.h"

#include "engine/grammar/gbnf_text.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/regex.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "engine/tokenizer/utf8.h"

namespace tandem::grammar {
namespace {

namespace json = boost::json;

constexpr int kMaxSchemaDepth = 64;

const char* const kWs = R"(( " " | "\n" [ \t]{0,16} )?)";
const char* const kChar = R"(( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-CefEF] [0-9a-fA-F]{3})"
                          R"( | [dD] [0-7] [0-9a-fA-F]{2} ) ) ))";
const char* const kPlainKeyChar = R"([^"\\\x00-\x1F])";

std::string lit(std::string_view bytes) { return gbnf_literal(bytes); }
std::string class_char(char32_t cp) { return gbnf_class_char(cp); }

// Decimal digit strings of equal length n between lo and hi (as strings, lo <= hi).
std::string digit_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "\"\"";
  if (lo == hi) return lit(lo);
  if (lo[0] == hi[0]) return lit(lo.substr(0, 1)) + " " + digit_range(lo.substr(1), hi.substr(1));
  size_t rest = lo.size() - 1;
  std::string nines(rest, '9'), zeros(rest, '0');
  auto any = [&](char a, char b) {
    std::string s = "[" + std::string(1, a) + "-" + std::string(1, b) + "]";
    if (rest) s += " [0-9]{" + std::to_string(rest) + "}";
    return s;
  };
  if (lo.substr(1) == zeros && hi.substr(1) == nines) return any(lo[0], hi[0]);
  std::vector<std::string> alts;
  alts.push_back(lit(lo.substr(0, 1)) + " ( " + digit_range(lo.substr(1), nines) + " )");
  if (lo[0] + 1 <= hi[0] - 1) alts.push_back(any(static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)));
  alts.push_back(lit(hi.substr(0, 1)) + " ( " + digit_range(zeros, hi.substr(1)) + " )");
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "( " + out + " )";
}

// Non-negative integers in [lo, hi] without leading zeros; hi < 0 means unbounded.
std::string uint_range(int64_t lo, int64_t hi) {
  std::string a = std::to_string(lo);
  std::vector<std::string> alts;
  size_t max_len = hi < 0 ? a.size() : std::to_string(hi).size();
  for (size_t n = a.size(); n <= max_len; ++n) {
    std::string lo_n = a;
    if (n != a.size()) {  // 10...0 (not "1" + string: GCC 12 warns of an overlap there)
      lo_n.assign(n, '0');
      lo_n[0] = '1';
    }
    std::string hi_n = std::string(n, '9');
    if (hi >= 0 && n == max_len) hi_n = std::to_string(hi);
    if (lo_n.size() == hi_n.size() && lo_n <= hi_n) alts.push_back(digit_range(lo_n, hi_n));
  }
  if (hi < 0) alts.push_back("[1-9] [0-9]{" + std::to_string(a.size()) + ",}");
  std::string out;
  for (const auto& x : alts) out += (out.empty() ? "" : " | ") + x;
  return "( " + out + " )";
}

class converter {
 public:
  explicit converter(const json::value& root) : root_(root) {}

  std::string run() {
    std::string top = visit(root_, "root-value", "#", 0);
    std::string out = "root ::= " + top + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void fail(const std::string& what, const std::string& where) {
    throw schema_error("json_schema: " + what + " at " + where);
  }

  std::string add_rule(const std::string& base, const std::string& body) {
    std::string name;
    for (char c : base) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (name.empty()) name = "r";
    std::string unique = name;
    for (int i = 2; names_.count(unique); ++i) unique = name + "-" + std::to_string(i);
    names_.insert(unique);
    rules_.push_back({unique, body});
    return unique;
  }
  // A shared piece, defined once.
  std::string shared(const std::string& name, const std::string& body) {
    if (!names_.count(name)) {
      names_.insert(name);
      rules_.push_back({name, body});
    }
    return name;
  }
  std::string ws() { return shared("ws", kWs); }
  std::string string_rule() { return shared("string", "\"\\\"\" " + std::string(kChar) + "* \"\\\"\""); }
  std::string number_rule() {
    return shared("number", R"("-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)");
  }
  std::string integer_rule() { return shared("integer", R"("-"? ( "0" | [1-9] [0-9]* ))"); }
  std::string any_value() {
    if (!names_.count("value")) {
      names_.insert("value");
      names_.insert("object");
      names_.insert("array");
      std::string w = ws(), s = string_rule(), n = number_rule();
      rules_.push_back({"value", "object | array | " + s + " | " + n + " | \"true\" | \"false\" | \"null\""});
      rules_.push_back({"object", "\"{\" " + w + " ( " + s + " " + w + " \":\" " + w + " value " + w + " ( \",\" " + w +
                                      " " + s + " " + w + " \":\" " + w + " value " + w + " )* )? \"}\""});
      rules_.push_back({"array", "\"[\" " + w + " ( value " + w + " ( \",\" " + w + " value " + w + " )* )? \"]\""});
    }
    return "value";
  }

  const json::value& resolve(const std::string& ref, const std::string& where) const {
    if (ref.empty() || ref[0] != '#') fail("$ref '" + ref + "' is not local to the schema (only \"#...\")", where);
    const json::value* v = &root_;
    std::string_view p = std::string_view(ref).substr(1);
    while (!p.empty()) {
      if (p[0] != '/') fail("$ref '" + ref + "' is not a JSON pointer", where);
      p.remove_prefix(1);
      size_t end = p.find('/');
      std::string tok(p.substr(0, end));
      p = end == std::string_view::npos ? std::string_view() : p.substr(end);
      std::string key;
      for (size_t i = 0; i < tok.size(); ++i) {
        if (tok[i] == '~' && i + 1 < tok.size() && (tok[i + 1] == '0' || tok[i + 1] == '1')) {
          key.push_back(tok[i + 1] == '0' ? '~' : '/');
          ++i;
        } else {
          key.push_back(tok[i]);
        }
      }
      if (v->is_object() && v->as_object().contains(key)) {
        v = &v->as_object().at(key);
      } else if (v->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) &&
                 std::stoul(key) < v->as_array().size()) {
        v = &v->as_array()[std::stoul(key)];
      } else {
        fail("$ref '" + ref + "' points at nothing", where);
      }
    }
    return *v;
  }

  static const std::set<std::string>& annotations() {
    static const std::set<std::string> k = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
    return k;
  }

  std::string visit(const json::value& s, const std::string& name, const std::string& where, int depth) {
    if (depth > kMaxSchemaDepth) fail("schema nested deeper than " + std::to_string(kMaxSchemaDepth), where);
    if (s.is_bool()) {
      if (s.as_bool()) return any_value();
      fail("the schema false allows no value", where);
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean", where);
    const json::object& o = s.as_object();
    static const std::set<std::string> known = {"type",
                                                "properties",
                                                "required",
                                                "additionalProperties",
                                                "enum",
                                                "const",
                                                "items",
                                                "minItems",
                                                "maxItems",
                                                "anyOf",
                                                "oneOf",
                                                "allOf",
                                                "$ref",
                                                "minLength",
                                                "maxLength",
                                                "format",
                                                "minimum",
                                                "maximum",
                                                "exclusiveMinimum",
                                                "exclusiveMaximum",
                                                "uniqueItems",
                                                "pattern",
                                                "propertyNames"};
    for (const auto& kv : o) {
      std::string k(kv.key());
      if (!known.count(k) && !annotations().count(k)) fail("unsupported keyword '" + k + "'", where);
    }
    if (const json::value* u = o.if_contains("uniqueItems"); u && !(u->is_bool() && !u->as_bool())) {
      fail("unsupported keyword 'uniqueItems'", where);
    }

    if (const json::value* r = o.if_contains("$ref")) {
      for (const auto& kv : o) {
        std::string k(kv.key());
        if (k != "$ref" && !annotations().count(k)) fail("keyword '" + k + "' beside $ref is not supported", where);
      }
      if (!r->is_string()) fail("$ref must be a string", where);
      std::string ref(r->as_string());
      auto it = refs_.find(ref);
      if (it != refs_.end()) return it->second;
      std::string rule_name = add_rule("ref-" + ref.substr(ref.find_last_of('/') + 1), "");
      refs_[ref] = rule_name;
      size_t index = rules_.size() - 1;
      std::string body = visit(resolve(ref, where), rule_name, ref, depth + 1);
      rules_[index].second = body;
      return rule_name;
    }
    if (const json::value* c = o.if_contains("const")) return lit(json::serialize(*c));
    if (const json::value* e = o.if_contains("enum")) {
      if (!e->is_array() || e->as_array().empty()) fail("enum must be a non-empty array", where + "/enum");
      std::string alts;
      for (const auto& v : e->as_array()) alts += (alts.empty() ? "" : " | ") + lit(json::serialize(v));
      return add_rule(name, alts);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const json::value* a = o.if_contains(key)) {
        if (!a->is_array() || a->as_array().empty()) fail(std::string(key) + " must be a non-empty array", where);
        if (o.contains("type") || o.contains("properties")) {
          fail(std::string(key) + " beside type or properties is not supported", where);
        }
        const json::array& arr = a->as_array();
        if (std::string(key) == "oneOf") check_disjoint(arr, where + "/oneOf");
        std::string alts;
        for (size_t i = 0; i < arr.size(); ++i) {
          std::string w = where + "/" + key + "/" + std::to_string(i);
          alts += (alts.empty() ? "" : " | ") + visit(arr[i], name + "-" + std::to_string(i), w, depth + 1);
        }
        return add_rule(name, alts);
      }
    }
    if (const json::value* a = o.if_contains("allOf")) {
      if (!a->is_array() || a->as_array().size() != 1) fail("allOf of more than one schema is not supported", where);
      return visit(a->as_array()[0], name, where + "/allOf/0", depth + 1);
    }

    std::vector<std::string> types;
    if (const json::value* t = o.if_contains("type")) {
      if (t->is_string()) {
        types.push_back(std::string(t->as_string()));
      } else if (t->is_array()) {
        for (const auto& x : t->as_array()) {
          if (!x.is_string()) fail("type must be a string or a list of strings", where);
          types.push_back(std::string(x.as_string()));
        }
      } else {
        fail("type must be a string or a list of strings", where);
      }
    } else if (o.contains("properties") || o.contains("additionalProperties") || o.contains("required")) {
      types.push_back("object");
    } else if (o.contains("items") || o.contains("minItems") || o.contains("maxItems")) {
      types.push_back("array");
    } else if (o.contains("minLength") || o.contains("maxLength") || o.contains("format") || o.contains("pattern")) {
      types.push_back("string");
    } else {
      return any_value();
    }
    std::string alts;
    for (const std::string& t : types) {
      std::string one = typed(o, t, types.size() == 1 ? name : name + "-" + t, where, depth);
      alts += (alts.empty() ? "" : " | ") + one;
    }
    return types.size() == 1 ? alts : add_rule(name, alts);
  }

  // The JSON types a schema can produce, and the const values of its properties (for oneOf).
  std::set<std::string> types_of(const json::value& s, int depth) {
    std::set<std::string> all = {"object", "array", "string", "number", "boolean", "null"};
    if (depth > kMaxSchemaDepth || !s.is_object()) return all;
    const json::object& o = s.as_object();
    if (const json::value* r = o.if_contains("$ref"); r && r->is_string()) {
      try {
        return types_of(resolve(std::string(r->as_string()), "#"), depth + 1);
      } catch (const schema_error&) {
        return all;
      }
    }
    auto kind = [](const json::value& v) -> std::string {
      if (v.is_object()) return "object";
      if (v.is_array()) return "array";
      if (v.is_string()) return "string";
      if (v.is_bool()) return "boolean";
      if (v.is_null()) return "null";
      return "number";
    };
    if (const json::value* c = o.if_contains("const")) return {kind(*c)};
    if (const json::value* e = o.if_contains("enum"); e && e->is_array()) {
      std::set<std::string> k;
      for (const auto& v : e->as_array()) k.insert(kind(v));
      return k;
    }
    if (const json::value* t = o.if_contains("type")) {
      std::set<std::string> k;
      auto add = [&](std::string_view x) { k.insert(x == "integer" ? "number" : std::string(x)); };
      if (t->is_string()) add(t->as_string());
      if (t->is_array()) {
        for (const auto& x : t->as_array()) {
          if (x.is_string()) add(x.as_string());
        }
      }
      return k;
    }
    if (o.contains("properties")) return {"object"};
    return all;
  }
  // The values a property must take in a branch (const or enum), by property name.
  std::map<std::string, std::set<std::string>> tags_of(const json::value& s) {
    std::map<std::string, std::set<std::string>> out;
    const json::value* v = &s;
    if (s.is_object()) {
      if (const json::value* r = s.as_object().if_contains("$ref"); r && r->is_string()) {
        v = &resolve(std::string(r->as_string()), "#");
      }
    }
    if (!v->is_object()) return out;
    const json::value* props = v->as_object().if_contains("properties");
    const json::value* req = v->as_object().if_contains("required");
    if (!props || !props->is_object() || !req || !req->is_array()) return out;
    for (const auto& r : req->as_array()) {
      if (!r.is_string()) continue;
      const json::value* p = props->as_object().if_contains(r.as_string());
      if (!p || !p->is_object()) continue;
      if (const json::value* c = p->as_object().if_contains("const")) {
        out[std::string(r.as_string())].insert(json::serialize(*c));
      } else if (const json::value* e = p->as_object().if_contains("enum"); e && e->is_array()) {
        for (const auto& x : e->as_array()) out[std::string(r.as_string())].insert(json::serialize(x));
      }
    }
    return out;
  }
  // oneOf needs exactly one branch to match: accepted when no value can match two branches
  // (disjoint types, or objects told apart by a required property's const/enum values).
  void check_disjoint(const json::array& branches, const std::string& where) {
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        std::set<std::string> a = types_of(branches[i], 0), b = types_of(branches[j], 0), both;
        std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(both, both.begin()));
        if (both.empty()) continue;
        bool told_apart = false;
        if (both == std::set<std::string>{"object"}) {
          auto ta = tags_of(branches[i]), tb = tags_of(branches[j]);
          for (const auto& [key, va] : ta) {
            auto it = tb.find(key);
            if (it == tb.end()) continue;
            std::set<std::string> common;
            std::set_intersection(va.begin(), va.end(), it->second.begin(), it->second.end(),
                                  std::inserter(common, common.begin()));
            if (common.empty()) told_apart = true;
          }
        }
        if (!told_apart) {
          fail("oneOf branches " + std::to_string(i) + " and " + std::to_string(j) +
                   " may both match one value (not supported: use anyOf, or tell them apart by type or a const "
                   "property)",
               where);
        }
      }
    }
  }

  static std::optional<double> number_of(const json::object& o, const char* key, const std::string& where) {
    const json::value* v = o.if_contains(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(std::string(key) + " must be a number", where);
    return v->to_number<double>();
  }
  static int64_t count_of(const json::object& o, const char* key, int64_t dflt, const std::string& where) {
    const json::value* v = o.if_contains(key);
    if (!v) return dflt;
    if (!v->is_number()) fail(std::string(key) + " must be a number", where);
    double d = v->to_number<double>();
    if (d < 0 || d != std::floor(d)) fail(std::string(key) + " must be a non-negative integer", where);
    if (d > kMaxRepeat) fail(std::string(key) + " above " + std::to_string(kMaxRepeat) + " is not supported", where);
    return static_cast<int64_t>(d);
  }

  std::string typed(const json::object& o, const std::string& t, const std::string& name, const std::string& where,
                    int depth) {
    if (t == "null") return "\"null\"";
    if (t == "boolean") return "( \"true\" | \"false\" )";
    if (t == "string") return string_of(o, name, where);
    if (t == "integer") return integer_of(o, name, where);
    if (t == "number") return number_of_schema(o, name, where);
    if (t == "array") return array_of(o, name, where, depth);
    if (t == "object") return object_of(o, name, where, depth);
    fail("unknown type '" + t + "'", where + "/type");
  }

  std::string string_of(const json::object& o, const std::string& name, const std::string& where) {
    if (const json::value* p = o.if_contains("pattern")) {
      if (o.contains("format")) fail("pattern beside format is not supported", where);
      if (!p->is_string()) fail("pattern must be a string", where);
      int64_t lo = count_of(o, "minLength", 0, where), hi = count_of(o, "maxLength", -1, where);
      if (hi >= 0 && hi < lo) fail("maxLength below minLength", where);
      std::string_view text = p->as_string();
      std::string body;
      try {
        body = regex_to_gbnf(text, lo, hi);
      } catch (const regex_error& e) {
        std::string shown(text.substr(0, 80));
        fail("pattern '" + shown + (text.size() > 80 ? "...'" : "'") + ": " + e.what(), where + "/pattern");
      }
      return add_rule(name, "\"\\\"\" " + body + " \"\\\"\"");
    }
    if (const json::value* f = o.if_contains("format")) {
      if (o.contains("minLength") || o.contains("maxLength")) fail("format beside minLength/maxLength", where);
      if (!f->is_string()) fail("format must be a string", where);
      return format_rule(std::string(f->as_string()), where + "/format");
    }
    int64_t lo = count_of(o, "minLength", 0, where), hi = count_of(o, "maxLength", -1, where);
    if (hi >= 0 && hi < lo) fail("maxLength below minLength", where);
    if (lo == 0 && hi < 0) return string_rule();
    std::string rep = "{" + std::to_string(lo) + "," + (hi >= 0 ? std::to_string(hi) : "") + "}";
    return add_rule(name, "\"\\\"\" " + std::string(kChar) + rep + " \"\\\"\"");
  }

  std::string format_rule(const std::string& f, const std::string& where) {
    const std::string q = "\"\\\"\"";
    const std::string day31 = R"(( "0" [1-9] | [12] [0-9] | "3" [01] ))";
    const std::string day30 = R"(( "0" [1-9] | [12] [0-9] | "30" ))";
    const std::string day28 = R"(( "0" [1-9] | "1" [0-9] | "2" [0-8] ))";
    const std::string date = "[0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" " + day31 +
                             " | ( \"0\" [469] | \"11\" ) \"-\" " + day30 + " | \"02-\" " + day28 + " )";
    const std::string time = R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )?)"
                             R"( ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
    if (f == "date") return shared("date", q + " " + date + " " + q);
    if (f == "time") return shared("time", q + " " + time + " " + q);
    if (f == "date-time") return shared("date-time", q + " " + date + " \"T\" " + time + " " + q);
    if (f == "uuid") {
      return shared("uuid",
                    q + R"( [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12} )" + q);
    }
    if (f == "email") {
      return shared("email",
                    q + R"( [a-zA-Z0-9._%+-]{1,32} "@" [a-zA-Z0-9-]{1,32} ( "." [a-zA-Z0-9-]{1,16} ){1,3} )" + q);
    }
    if (f == "ipv4") {
      const std::string octet = R"(( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9] ))";
      return shared("ipv4", q + " " + octet + " ( \".\" " + octet + " ){3} " + q);
    }
    fail("unsupported format '" + f + "'", where);
  }

  std::string integer_of(const json::object& o, const std::string& name, const std::string& where) {
    auto mn = number_of(o, "minimum", where), mx = number_of(o, "maximum", where);
    auto xmn = number_of(o, "exclusiveMinimum", where), xmx = number_of(o, "exclusiveMaximum", where);
    if (!mn && !mx && !xmn && !xmx) return integer_rule();
    constexpr double kLimit = 1e15;
    std::optional<int64_t> lo, hi;
    auto tighten_lo = [&](double v) {
      if (std::fabs(v) > kLimit) fail("integer bound beyond 1e15", where);
      int64_t x = static_cast<int64_t>(std::ceil(v));
      lo = lo ? std::max(*lo, x) : x;
    };
    auto tighten_hi = [&](double v) {
      if (std::fabs(v) > kLimit) fail("integer bound beyond 1e15", where);
      int64_t x = static_cast<int64_t>(std::floor(v));
      hi = hi ? std::min(*hi, x) : x;
    };
    if (mn) tighten_lo(*mn);
    if (xmn) tighten_lo(std::floor(*xmn) + 1);
    if (mx) tighten_hi(*mx);
    if (xmx) tighten_hi(std::ceil(*xmx) - 1);
    if (lo && hi && *lo > *hi) fail("no integer lies within minimum and maximum", where);
    std::vector<std::string> alts;
    // Non-negative part, then negative part as "-" and the magnitudes.
    if (!hi || *hi >= 0) alts.push_back(uint_range(lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : -1));
    if (!lo || *lo < 0) {
      int64_t mag_lo = hi ? std::max<int64_t>(-*hi, 1) : 1;
      alts.push_back("\"-\" " + uint_range(mag_lo, lo ? -*lo : -1));
    }
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return add_rule(name, body);
  }

  std::string number_of_schema(const json::object& o, const std::string& name, const std::string& where) {
    auto mn = number_of(o, "minimum", where), mx = number_of(o, "maximum", where);
    if (o.contains("exclusiveMinimum") || o.contains("exclusiveMaximum")) {
      fail("exclusiveMinimum/exclusiveMaximum on type number is not supported (use integer or minimum/maximum)", where);
    }
    if (!mn && !mx) return number_rule();
    for (auto b : {mn, mx}) {
      if (b && (*b != std::floor(*b) || std::fabs(*b) > 1e15)) {
        fail("minimum/maximum of a number must be integers within 1e15", where);
      }
    }
    if (mn && mx && *mn > *mx) fail("minimum above maximum", where);
    // x in [a, b] with x >= 0: an integer part in [a, b - 1] with any fraction, or b itself
    // with zeros after the point (no exponent).
    auto non_negative = [&](int64_t a, std::optional<int64_t> b) {
      const std::string frac = R"(( "." [0-9]{1,15} )?)";
      if (!b) return uint_range(a, -1) + " " + frac;
      std::string exact = lit(std::to_string(*b)) + R"( ( "." "0"{1,15} )?)";
      if (*b == a) return "( " + exact + " )";
      return "( " + uint_range(a, *b - 1) + " " + frac + " | " + exact + " )";
    };
    std::optional<int64_t> lo, hi;
    if (mn) lo = static_cast<int64_t>(*mn);
    if (mx) hi = static_cast<int64_t>(*mx);
    std::vector<std::string> alts;
    if (!hi || *hi >= 0) alts.push_back(non_negative(lo ? std::max<int64_t>(*lo, 0) : 0, hi));
    if (!lo || *lo < 0) {
      std::optional<int64_t> mag_hi;
      if (lo) mag_hi = -*lo;
      alts.push_back("\"-\" " + non_negative(hi && *hi < 0 ? -*hi : 0, mag_hi));
    }
    std::string body;
    for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
    return add_rule(name, body);
  }

  std::string array_of(const json::object& o, const std::string& name, const std::string& where, int depth) {
    std::string item;
    if (const json::value* it = o.if_contains("items")) {
      if (it->is_array()) fail("items as a list (use prefixItems, not supported)", where + "/items");
      item = visit(*it, name + "-item", where + "/items", depth + 1);
    } else {
      item = any_value();
    }
    int64_t lo = count_of(o, "minItems", 0, where), hi = count_of(o, "maxItems", -1, where);
    if (hi >= 0 && hi < lo) fail("maxItems below minItems", where);
    std::string w = ws();
    std::string more = "( \",\" " + w + " " + item + " " + w + " )";
    auto rep = [&](int64_t a, int64_t b) {
      return "{" + std::to_string(a) + "," + (b >= 0 ? std::to_string(b) : "") + "}";
    };
    std::string body;
    if (hi == 0) {
      body = "\"[\" " + w + " \"]\"";
    } else if (lo == 0) {
      body = "\"[\" " + w + " ( " + item + " " + w + " " + more + rep(0, hi < 0 ? -1 : hi - 1) + " )? \"]\"";
    } else {
      body = "\"[\" " + w + " " + item + " " + w + " " + more + rep(lo - 1, hi < 0 ? -1 : hi - 1) + " \"]\"";
    }
    return add_rule(name, body);
  }

  // A key string that is none of `names` (and has no escapes, so it is written one way).
  std::string key_except(const std::vector<std::string>& names, const std::string& base) {
    struct node {
      std::map<char32_t, int> kids;
      bool terminal = false;
    };
    std::vector<node> trie(1);
    for (const std::string& n : names) {
      int cur = 0;
      for (size_t i = 0; i < n.size();) {
        utf8::decoded d = utf8::decode_lenient(n, i);
        i += d.length;
        auto it = trie[cur].kids.find(d.cp);
        if (it == trie[cur].kids.end()) {
          trie.push_back({});
          it = trie[cur].kids.emplace(d.cp, static_cast<int>(trie.size() - 1)).first;
        }
        cur = it->second;
      }
      trie[cur].terminal = true;
    }
    std::string free_tail = shared("key-tail", std::string(kPlainKeyChar) + "* \"\\\"\"");
    std::vector<std::string> rule_names(trie.size());
    for (size_t i = 0; i < trie.size(); ++i) rule_names[i] = add_rule(base + "-k" + std::to_string(i), "");
    for (size_t i = 0; i < trie.size(); ++i) {
      std::vector<std::string> alts;
      if (!trie[i].terminal) alts.push_back("\"\\\"\"");
      std::string cls = "[^\"\\\\\\x00-\\x1F";
      for (auto& [cp, k] : trie[i].kids) cls += class_char(cp);
      alts.push_back(cls + "] " + free_tail);
      for (auto& [cp, k] : trie[i].kids) alts.push_back(lit(utf8::encode(cp)) + " " + rule_names[k]);
      std::string body;
      for (const auto& a : alts) body += (body.empty() ? "" : " | ") + a;
      for (auto& r : rules_) {
        if (r.first == rule_names[i]) r.second = body;
      }
    }
    return "\"\\\"\" " + rule_names[0];
  }

  // The rule of the keys propertyNames allows ("" for false): a schema of strings.
  std::string property_names(const json::value& pn, const std::string& name, const std::string& where, int depth) {
    if (pn.is_bool()) return pn.as_bool() ? string_rule() : "";
    if (!pn.is_object()) fail("propertyNames must be a schema", where);
    json::object c = pn.as_object();
    bool has_value_keyword = false;
    for (const auto& kv : c) {
      if (!annotations().count(std::string(kv.key()))) has_value_keyword = true;
    }
    if (!has_value_keyword) return string_rule();
    if (!c.contains("type") && !c.contains("enum") && !c.contains("const") && !c.contains("$ref") &&
        !c.contains("anyOf") && !c.contains("oneOf") && !c.contains("allOf")) {
      c["type"] = "string";
    }
    json::value copy(std::move(c));
    if (types_of(copy, 0) != std::set<std::string>{"string"}) fail("propertyNames must allow strings only", where);
    return visit(copy, name + "-key", where, depth + 1);
  }

  std::string object_of(const json::object& o, const std::string& name, const std::string& where, int depth) {
    std::vector<std::pair<std::string, const json::value*>> props;
    const json::value* p = o.if_contains("properties");
    if (p && !p->is_object()) fail("properties must be an object", where);
    static const json::value kAny = json::object();
    if (p) {
      for (const auto& kv : p->as_object()) props.push_back({std::string(kv.key()), &kv.value()});
    }
    std::set<std::string> required;
    if (const json::value* r = o.if_contains("required")) {
      if (!r->is_array()) fail("required must be an array", where);
      for (const auto& x : r->as_array()) {
        if (!x.is_string()) fail("required must list strings", where);
        std::string k(x.as_string());
        required.insert(k);
        if (std::none_of(props.begin(), props.end(), [&](auto& pr) { return pr.first == k; })) {
          props.push_back({k, &kAny});
        }
      }
    }
    const json::value* add = o.if_contains("additionalProperties");
    std::string add_value;  // empty: no additional properties
    if (add) {
      if (add->is_bool()) {
        if (add->as_bool()) add_value = any_value();
      } else {
        add_value = visit(*add, name + "-additional", where + "/additionalProperties", depth + 1);
      }
    } else if (props.empty()) {
      add_value = any_value();  // {"type":"object"}: any object
    }
    std::string key_rule;  // keys of additional properties when propertyNames says what they are
    if (const json::value* pn = o.if_contains("propertyNames")) {
      if (!props.empty()) fail("propertyNames beside properties or required is not supported", where);
      key_rule = property_names(*pn, name, where + "/propertyNames", depth);
      if (key_rule.empty()) add_value.clear();  // propertyNames false: no property at all
    }
    std::string w = ws();
    std::vector<std::string> kv(props.size());
    for (size_t i = 0; i < props.size(); ++i) {
      const auto& [key, schema] = props[i];
      if (schema->is_bool() && !schema->as_bool()) {
        if (required.count(key)) fail("required property '" + key + "' has the schema false", where);
        continue;
      }
      std::string value = visit(*schema, name + "-" + key, where + "/properties/" + key, depth + 1);
      kv[i] = add_rule(name + "-" + key + "-kv",
                       lit(json::serialize(json::string(key))) + " " + w + " \":\" " + w + " " + value + " " + w);
    }
    std::string tail;  // ( "," additional )*
    std::string first_extra;
    if (!add_value.empty()) {
      std::vector<std::string> declared;
      for (auto& pr : props) declared.push_back(pr.first);
      std::string key = !props.empty()     ? key_except(declared, name + "-extra")
                        : key_rule.empty() ? string_rule()
                                           : key_rule;
      std::string extra = add_rule(name + "-extra-kv", key + " " + w + " \":\" " + w + " " + add_value + " " + w);
      tail = "( \",\" " + w + " " + extra + " )*";
      first_extra = extra;
    }
    // after[i]: something was written before property i; start[i]: nothing yet.
    size_t n = props.size();
    std::vector<std::string> after(n + 1), start(n + 1);
    after[n] = tail.empty() ? "\"\"" : tail;
    start[n] = first_extra.empty() ? "\"\"" : "( " + first_extra + " " + tail + " )?";
    for (size_t i = n; i-- > 0;) {
      if (kv[i].empty()) {
        after[i] = after[i + 1];
        start[i] = start[i + 1];
        continue;
      }
      bool req = required.count(props[i].first) > 0;
      std::string a = "\",\" " + w + " " + kv[i] + " " + after[i + 1];
      std::string s = kv[i] + " " + after[i + 1];
      after[i] = add_rule(name + "-after-" + std::to_string(i), req ? a : a + " | " + after[i + 1]);
      start[i] = add_rule(name + "-from-" + std::to_string(i), req ? s : s + " | " + start[i + 1]);
    }
    return add_rule(name, "\"{\" " + w + " " + start[0] + " \"}\"");
  }

  const json::value& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_{"root"};
  std::map<std::string, std::string> refs_;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_json) {
  boost::system::error_code ec;
  json::value v = json::parse(schema_json, ec);
  if (ec) throw schema_error("json_schema: not JSON (" + ec.message() + ")");
  return converter(v).run();
}

std::string json_object_gbnf() { return json_schema_to_gbnf(R"({"type":"object"})"); }

}  // namespace tandem::grammar
