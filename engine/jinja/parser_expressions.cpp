// The Jinja parser's expressions (parser.h has the grammar and its precedence).
#include "engine/jinja/builtins.h"
#include "engine/jinja/parser_state.h"

namespace tandem::jinja::detail {

bool parser::is_tuple_end() const {
  const auto k = cur().type;
  if (k == token::kind::var_end || k == token::kind::block_end || k == token::kind::end) return true;
  if (k == token::kind::op && (cur().value == ")" || cur().value == "]" || cur().value == "}")) return true;
  return false;
}

// expression (',' expression)*: a tuple when there is a comma.
expr_ptr parser::parse_tuple(bool with_condexpr, bool explicit_parens, bool stop_at_if) {
  auto t = make(expr::kind::tuple);
  bool is_tuple = false;
  for (;;) {
    if (!t->kids.empty()) expect_op(",");
    if (is_tuple_end() || (stop_at_if && is_name("if"))) break;
    t->kids.push_back(with_condexpr ? parse_expression() : parse_or());
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!t->kids.empty()) return std::move(t->kids[0]);
    if (!explicit_parens) fail("expected an expression, got " + describe());
  }
  return t;
}

expr_ptr parser::parse_expression() { return parse_condexpr(); }

expr_ptr parser::parse_condexpr() {
  depth_guard g(*this);
  expr_ptr e = parse_or();
  while (skip_name("if")) {
    auto c = make(expr::kind::cond);
    c->kids.push_back(parse_or());
    c->kids.push_back(std::move(e));
    c->kids.push_back(skip_name("else") ? parse_condexpr() : nullptr);
    e = std::move(c);
  }
  return e;
}

expr_ptr parser::parse_or() {
  expr_ptr left = parse_and();
  while (skip_name("or")) {
    auto n = make(expr::kind::logic_or);
    n->kids.push_back(std::move(left));
    n->kids.push_back(parse_and());
    left = std::move(n);
  }
  return left;
}

expr_ptr parser::parse_and() {
  expr_ptr left = parse_not();
  while (skip_name("and")) {
    auto n = make(expr::kind::logic_and);
    n->kids.push_back(std::move(left));
    n->kids.push_back(parse_not());
    left = std::move(n);
  }
  return left;
}

expr_ptr parser::parse_not() {
  if (is_name("not")) {
    depth_guard g(*this);
    auto n = make(expr::kind::unary);
    next();
    n->o = op::not_;
    n->kids.push_back(parse_not());
    return n;
  }
  return parse_compare();
}

expr_ptr parser::parse_compare() {
  expr_ptr first = parse_math1();
  expr_ptr cmp;
  for (;;) {
    op o;
    if (is_op("==")) {
      o = op::eq;
    } else if (is_op("!=")) {
      o = op::ne;
    } else if (is_op("<")) {
      o = op::lt;
    } else if (is_op("<=")) {
      o = op::le;
    } else if (is_op(">")) {
      o = op::gt;
    } else if (is_op(">=")) {
      o = op::ge;
    } else if (is_name("in")) {
      o = op::in;
    } else if (is_name("not") && peek().type == token::kind::name && peek().value == "in") {
      next();
      o = op::not_in;
    } else {
      break;
    }
    next();
    if (!cmp) {
      cmp = make(expr::kind::compare);
      cmp->kids.push_back(std::move(first));
    }
    cmp->ops.push_back(o);
    cmp->kids.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

expr_ptr parser::binary(op o, expr_ptr l, expr_ptr r) {
  auto n = make(expr::kind::binary);
  n->o = o;
  n->kids.push_back(std::move(l));
  n->kids.push_back(std::move(r));
  return n;
}

expr_ptr parser::parse_math1() {
  expr_ptr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const op o = cur().value == "+" ? op::add : op::sub;
    next();
    left = binary(o, std::move(left), parse_concat());
  }
  return left;
}

expr_ptr parser::parse_concat() {
  expr_ptr first = parse_math2();
  if (!is_op("~")) return first;
  auto n = make(expr::kind::concat);
  n->kids.push_back(std::move(first));
  while (skip_op("~")) n->kids.push_back(parse_math2());
  return n;
}

expr_ptr parser::parse_math2() {
  expr_ptr left = parse_pow();
  for (;;) {
    op o;
    if (is_op("*")) {
      o = op::mul;
    } else if (is_op("/")) {
      o = op::div;
    } else if (is_op("//")) {
      o = op::floordiv;
    } else if (is_op("%")) {
      o = op::mod;
    } else {
      break;
    }
    next();
    left = binary(o, std::move(left), parse_pow());
  }
  return left;
}

expr_ptr parser::parse_pow() {
  expr_ptr left = parse_unary();
  while (skip_op("**")) left = binary(op::pow, std::move(left), parse_unary());
  return left;
}

expr_ptr parser::parse_unary(bool with_filter) {
  depth_guard g(*this);
  expr_ptr node;
  if (is_op("-") || is_op("+")) {
    auto n = make(expr::kind::unary);
    n->o = cur().value == "-" ? op::neg : op::pos;
    next();
    n->kids.push_back(parse_unary(false));
    node = std::move(n);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

expr_ptr parser::parse_primary() {
  const token& tk = cur();
  if (tk.type == token::kind::name) {
    auto n = make(expr::kind::literal);
    if (tk.value == "true" || tk.value == "True") {
      n->lit = value(true);
    } else if (tk.value == "false" || tk.value == "False") {
      n->lit = value(false);
    } else if (tk.value == "none" || tk.value == "None") {
      n->lit = value::none();
    } else {
      n->k = expr::kind::name;
      n->name = tk.value;
      n->slot = intern(tk.value);
    }
    next();
    return n;
  }
  if (tk.type == token::kind::string) {
    std::string s;
    auto n = make(expr::kind::literal);
    while (cur().type == token::kind::string) {  // adjacent literals join
      s += cur().value;
      next();
    }
    n->lit = value(std::move(s));
    return n;
  }
  if (tk.type == token::kind::integer) {
    auto n = make(expr::kind::literal);
    errno = 0;
    const long long v = std::strtoll(tk.value.c_str(), nullptr, 0);
    if (errno == ERANGE) fail("integer literal out of range");
    n->lit = value(static_cast<int64_t>(v));
    next();
    return n;
  }
  if (tk.type == token::kind::number) {
    auto n = make(expr::kind::literal);
    n->lit = value(std::strtod(tk.value.c_str(), nullptr));
    next();
    return n;
  }
  if (is_op("(")) {
    next();
    expr_ptr e = parse_tuple(true, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) {
    auto n = make(expr::kind::list);
    next();
    while (!is_op("]")) {
      if (!n->kids.empty()) expect_op(",");
      if (is_op("]")) break;
      n->kids.push_back(parse_expression());
    }
    next();
    return n;
  }
  if (is_op("{")) {
    auto n = make(expr::kind::dict);
    next();
    while (!is_op("}")) {
      if (!n->kids.empty()) expect_op(",");
      if (is_op("}")) break;
      n->kids.push_back(parse_expression());
      expect_op(":");
      n->kids.push_back(parse_expression());
    }
    next();
    return n;
  }
  fail("unexpected " + describe());
}

expr_ptr parser::parse_postfix(expr_ptr node) {
  for (;;) {
    if (is_op(".")) {
      next();
      if (cur().type == token::kind::name) {
        auto n = make(expr::kind::getattr);
        n->name = cur().value;
        next();
        n->kids.push_back(std::move(node));
        node = std::move(n);
      } else if (cur().type == token::kind::integer) {
        auto n = make(expr::kind::getitem);
        auto idx = make(expr::kind::literal);
        idx->lit = value(static_cast<int64_t>(std::strtoll(cur().value.c_str(), nullptr, 10)));
        next();
        n->kids.push_back(std::move(node));
        n->kids.push_back(std::move(idx));
        node = std::move(n);
      } else {
        fail("expected name or number");
      }
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

expr_ptr parser::parse_subscript(expr_ptr node) {
  next();                       // [
  std::vector<expr_ptr> parts;  // one subscript, or a tuple of them
  while (!is_op("]")) {
    if (!parts.empty()) expect_op(",");
    parts.push_back(parse_subscribed());
  }
  next();
  if (parts.size() == 1 && parts[0]->k == expr::kind::slice) {
    parts[0]->kids.insert(parts[0]->kids.begin(), std::move(node));
    return std::move(parts[0]);
  }
  auto n = make(expr::kind::getitem);
  n->kids.push_back(std::move(node));
  if (parts.size() == 1) {
    n->kids.push_back(std::move(parts[0]));
  } else {
    auto t = make(expr::kind::tuple);
    t->kids = std::move(parts);
    n->kids.push_back(std::move(t));
  }
  return n;
}

// An index, or a slice a:b:c (a slice node whose kids are start, stop, step, any null).
expr_ptr parser::parse_subscribed() {
  expr_ptr start;
  if (!is_op(":")) {
    start = parse_expression();
    if (!is_op(":")) return start;
  }
  auto s = make(expr::kind::slice);
  next();  // :
  s->kids.push_back(std::move(start));
  s->kids.push_back(is_op(":") || is_op("]") || is_op(",") ? nullptr : parse_expression());
  if (skip_op(":")) {
    s->kids.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression());
  } else {
    s->kids.push_back(nullptr);
  }
  return s;
}

void parser::parse_call_args(call_args_ast& a) {
  expect_op("(");
  bool need_comma = false;
  while (!is_op(")")) {
    if (need_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      a.star_args = parse_expression();
    } else if (skip_op("**")) {
      a.star_kwargs = parse_expression();
    } else if (cur().type == token::kind::name && peek().type == token::kind::op && peek().value == "=") {
      std::string key = cur().value;
      next();
      next();
      a.keywords.emplace_back(std::move(key), parse_expression());
    } else {
      if (!a.keywords.empty()) fail("positional argument after keyword argument");
      a.positional.push_back(parse_expression());
    }
    need_comma = true;
  }
  next();
}

expr_ptr parser::parse_call(expr_ptr node) {
  auto n = make(expr::kind::call);
  parse_call_args(n->args);
  n->kids.push_back(std::move(node));
  return n;
}

expr_ptr parser::parse_filter_expr(expr_ptr node) {
  for (;;) {
    if (is_op("|")) {
      node = parse_filter(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

// `| name(args)`; with `inline_start` the '|' is absent ({% filter name %}).
expr_ptr parser::parse_filter(expr_ptr input, bool inline_start) {
  if (!inline_start) next();  // |
  auto n = make(expr::kind::filter);
  n->name = expect_name();
  while (skip_op(".")) {
    n->name.push_back('.');
    n->name += expect_name();
  }
  if (is_op("(")) parse_call_args(n->args);
  n->filter = find_filter(n->name);
  if (n->filter == nullptr && if_depth_ == 0) fail("no filter named '" + n->name + "'");
  n->kids.push_back(std::move(input));
  return n;
}

expr_ptr parser::parse_test(expr_ptr input) {
  auto n = make(expr::kind::test);
  next();  // is
  if (skip_name("not")) n->negated = true;
  n->name = expect_name();
  while (skip_op(".")) {
    n->name.push_back('.');
    n->name += expect_name();
  }
  if (is_op("(")) {
    parse_call_args(n->args);
  } else if ((cur().type == token::kind::name || cur().type == token::kind::string ||
              cur().type == token::kind::integer || cur().type == token::kind::number || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("you cannot chain multiple tests with is");
    n->args.positional.push_back(parse_postfix(parse_primary()));
  }
  n->test = find_test(n->name);
  if (n->test == nullptr && if_depth_ == 0) fail("no test named '" + n->name + "'");
  n->kids.push_back(std::move(input));
  return n;
}

}  // namespace tandem::jinja::detail
