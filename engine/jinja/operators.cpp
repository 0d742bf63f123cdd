// The evaluator's operators: arithmetic, concatenation and repetition with Python's rules
// (floor division and modulo round toward negative infinity), and the comparisons.
#include <cmath>

#include "engine/jinja/builtins.h"
#include "engine/jinja/format.h"

namespace tandem::jinja {
namespace {

value floor_div(const value& a, const value& b) {
  if (a.is_float() || b.is_float()) {
    if (b.as_double() == 0) throw render_error("ZeroDivisionError: float floor division by zero");
    return value(std::floor(a.as_double() / b.as_double()));
  }
  const int64_t x = a.as_int(), y = b.as_int();
  if (y == 0) throw render_error("ZeroDivisionError: integer division or modulo by zero");
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
  return value(q);
}

value modulo(const value& a, const value& b) {
  if (a.is_float() || b.is_float()) {
    const double y = b.as_double();
    if (y == 0) throw render_error("ZeroDivisionError: float modulo");
    double r = std::fmod(a.as_double(), y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return value(r);
  }
  const int64_t x = a.as_int(), y = b.as_int();
  if (y == 0) throw render_error("ZeroDivisionError: integer division or modulo by zero");
  int64_t r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return value(r);
}

[[noreturn]] void unsupported(const char* sym, const value& a, const value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  throw render_error(std::string("unsupported operand type(s) for ") + sym + ": '" + std::string(a.type_name()) +
                     "' and '" + std::string(b.type_name()) + "'");
}

value repeat(const value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? value(std::string()) : value::array({}, seq.is_array() && seq.is_tuple());
  if (seq.is_string()) {
    if (seq.text().size() * static_cast<size_t>(n) > kMaxRenderedBytes)
      throw render_error("string repetition too large");
    string_builder b;
    for (int64_t i = 0; i < n; ++i) b.append(seq);
    return b.take();
  }
  if (seq.items().size() * static_cast<size_t>(n) > kMaxRenderedBytes / 16)
    throw render_error("list repetition too large");
  std::vector<value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return value::array(std::move(out), seq.is_tuple());
}

}  // namespace

// Markup + x escapes x (markupsafe), and the sum is Markup.
value markup_concat(const value& a, const value& b) {
  if (!a.is_string() || !b.is_string()) unsupported("+", a, b);
  const auto side = [](const value& v) { return v.is_markup() ? v : html_escape(v); };
  string_builder s;
  s.append(side(a));
  s.append(side(b));
  string_data d = s.take_data();
  d.markup = true;
  return value::string(std::make_shared<string_data>(std::move(d)));
}

value evaluator::eval_binary(op o, const value& a, const value& b) {
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.is_float() || b.is_float());
  switch (o) {
    case op::add:
      if (nums) return floats ? value(a.as_double() + b.as_double()) : value(a.as_int() + b.as_int());
      if (a.is_markup() || b.is_markup()) return markup_concat(a, b);
      if (a.is_string() && b.is_string()) {
        string_builder s;
        s.append(a);
        s.append(b);
        return s.take();
      }
      if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple() && !a.is_generator() && !b.is_generator()) {
        std::vector<value> xs = a.items();
        xs.insert(xs.end(), b.items().begin(), b.items().end());
        return value::array(std::move(xs), a.is_tuple());
      }
      unsupported("+", a, b);
    case op::sub:
      if (nums) return floats ? value(a.as_double() - b.as_double()) : value(a.as_int() - b.as_int());
      unsupported("-", a, b);
    case op::mul:
      if (nums) return floats ? value(a.as_double() * b.as_double()) : value(a.as_int() * b.as_int());
      if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
      if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
      unsupported("*", a, b);
    case op::div:
      if (nums) {
        if (b.as_double() == 0) throw render_error("ZeroDivisionError: division by zero");
        return value(a.as_double() / b.as_double());
      }
      unsupported("/", a, b);
    case op::floordiv:
      if (nums) return floor_div(a, b);
      unsupported("//", a, b);
    case op::mod:
      if (nums) return modulo(a, b);
      if (a.is_string()) return percent_format(a, b);
      unsupported("%", a, b);
    case op::pow:
      if (nums) {
        if (!floats && b.as_int() >= 0) {
          int64_t r = 1, base = a.as_int();
          for (int64_t e = b.as_int(); e > 0; e >>= 1) {
            if (e & 1) r *= base;
            base *= base;
          }
          return value(r);
        }
        return value(std::pow(a.as_double(), b.as_double()));
      }
      unsupported("**", a, b);
    default:
      break;
  }
  throw render_error("bad operator");
}

bool evaluator::eval_compare(op o, const value& a, const value& b) {
  switch (o) {
    case op::eq:
      return a.equals(b);
    case op::ne:
      return !a.equals(b);
    case op::lt:
      return a.less(b);
    case op::le:
      return a.less(b) || a.equals(b);
    case op::gt:
      return b.less(a);
    case op::ge:
      return b.less(a) || a.equals(b);
    case op::in:
    case op::not_in: {
      bool found = false;
      if (b.is_string()) {
        if (!a.is_string()) {
          if (a.is_undefined()) undefined_error(a);
          throw render_error("'in <string>' requires string as left operand, not " + std::string(a.type_name()));
        }
        found = b.text().find(a.text()) != std::string::npos;
      } else if (b.is_array()) {
        for (const auto& x : b.items()) found = found || x.equals(a);
      } else if (b.is_object()) {
        for (const auto& [k, x] : b.obj().entries) found = found || k.equals(a);
      } else if (!b.is_undefined()) {
        throw render_error("argument of type '" + std::string(b.type_name()) + "' is not iterable");
      }
      return o == op::in ? found : !found;
    }
    default:
      throw render_error("bad comparison");
  }
}

}  // namespace tandem::jinja
