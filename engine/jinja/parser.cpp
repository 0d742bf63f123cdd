#include "engine/jinja/parser.h"

#include <unordered_map>

#include "engine/jinja/builtins.h"

namespace tandem::jinja {
namespace {

constexpr int kMaxNesting = 200;  // expression and block depth (bounds the recursion)

class parser {
 public:
  explicit parser(std::vector<token> tokens) : t_(std::move(tokens)) {}

  program run() {
    program p;
    p.root = subparse({});
    if (cur().type != token::kind::end) fail("unexpected '" + cur().value + "'");
    p.names = std::move(names_);
    return p;
  }

 private:
  const token& cur() const { return t_[i_]; }
  const token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  [[noreturn]] void fail(const std::string& why) const { throw syntax_error(cur().line, why); }

  bool is_op(std::string_view o) const { return cur().type == token::kind::op && cur().value == o; }
  bool is_name(std::string_view n) const { return cur().type == token::kind::name && cur().value == n; }
  bool skip_op(std::string_view o) {
    if (!is_op(o)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view o) {
    if (!skip_op(o)) fail("expected '" + std::string(o) + "', got " + describe());
  }
  std::string expect_name() {
    if (cur().type != token::kind::name) fail("expected a name, got " + describe());
    std::string n = cur().value;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != token::kind::block_end) fail("expected end of statement block, got " + describe());
    next();
  }
  std::string describe() const {
    switch (cur().type) {
      case token::kind::end:
        return "end of template";
      case token::kind::block_end:
        return "end of statement block";
      case token::kind::var_end:
        return "end of print statement";
      case token::kind::text:
        return "template text";
      default:
        return "'" + cur().value + "'";
    }
  }

  int intern(const std::string& name) {
    auto [it, added] = slots_.try_emplace(name, static_cast<int>(names_.size()));
    if (added) names_.push_back(name);
    return it->second;
  }

  struct depth_guard {
    parser& p;
    explicit depth_guard(parser& pp) : p(pp) {
      if (++p.depth_ > kMaxNesting) p.fail("template nested too deeply");
    }
    ~depth_guard() { --p.depth_; }
  };

  expr_ptr make(expr::kind k) {
    auto e = std::make_unique<expr>();
    e->k = k;
    e->line = cur().line;
    return e;
  }

  // ---- statements ----

  // Statements up to a block whose first name is one of `ends` (left unconsumed, at the
  // name), or to the end of the template.
  body subparse(std::initializer_list<std::string_view> ends) {
    body out;
    for (;;) {
      const token& tk = cur();
      if (tk.type == token::kind::end) {
        if (ends.size() != 0) {
          std::string want;
          for (auto e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
          fail("unexpected end of template, expected " + want);
        }
        return out;
      }
      if (tk.type == token::kind::text) {
        auto s = std::make_unique<stmt>();
        s->k = stmt::kind::text;
        s->line = tk.line;
        s->text = tk.value;
        out.push_back(std::move(s));
        next();
      } else if (tk.type == token::kind::var_begin) {
        auto s = std::make_unique<stmt>();
        s->k = stmt::kind::output;
        s->line = tk.line;
        next();
        s->value_expr = parse_tuple();
        if (cur().type != token::kind::var_end) fail("expected end of print statement, got " + describe());
        next();
        out.push_back(std::move(s));
      } else if (tk.type == token::kind::block_begin) {
        next();
        if (cur().type != token::kind::name) fail("expected a statement name, got " + describe());
        for (auto e : ends) {
          if (cur().value == e) return out;
        }
        if (auto s = parse_statement()) out.push_back(std::move(s));
      } else {
        fail("unexpected " + describe());
      }
    }
  }

  stmt_ptr new_stmt(stmt::kind k) {
    auto s = std::make_unique<stmt>();
    s->k = k;
    s->line = cur().line;
    return s;
  }

  stmt_ptr parse_statement() {
    depth_guard g(*this);
    const std::string kw = cur().value;
    if (kw == "if") return parse_if();
    if (kw == "for") return parse_for();
    if (kw == "set") return parse_set();
    if (kw == "macro") return parse_macro();
    if (kw == "call") return parse_call_block();
    if (kw == "filter") return parse_filter_block();
    if (kw == "with") return parse_with();
    if (kw == "generation") {  // transformers' {% generation %}: renders its body
      next();
      expect_block_end();
      auto s = new_stmt(stmt::kind::with);
      s->inner = subparse({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) fail("'" + kw + "' outside a loop");
      auto s = new_stmt(kw == "break" ? stmt::kind::break_ : stmt::kind::continue_);
      next();
      expect_block_end();
      return s;
    }
    fail("unknown tag '" + kw + "'");
  }

  stmt_ptr parse_if() {
    auto s = new_stmt(stmt::kind::if_);
    next();
    ++if_depth_;
    for (;;) {
      expr_ptr cond = parse_tuple(false);
      expect_block_end();
      body b = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(b));
      const std::string which = cur().value;
      next();
      if (which == "elif") continue;
      if (which == "else") {
        expect_block_end();
        s->branches.emplace_back(nullptr, subparse({"endif"}));
        next();
      }
      break;
    }
    --if_depth_;
    expect_block_end();
    return s;
  }

  stmt_ptr parse_for() {
    auto s = new_stmt(stmt::kind::for_);
    next();
    s->targets = parse_target(true, false);
    if (!skip_name("in")) fail("expected 'in', got " + describe());
    s->value_expr = parse_tuple(false, false, true);
    if (skip_name("if")) s->condition = parse_expression();
    if (skip_name("recursive")) fail("recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->inner = subparse({"endfor", "else"});
    --loop_depth_;
    if (cur().value == "else") {
      next();
      expect_block_end();
      s->else_body = subparse({"endfor"});
    }
    next();
    expect_block_end();
    return s;
  }

  target parse_target(bool allow_tuple, bool allow_namespace) {
    target t;
    const auto one = [&]() {
      target x;
      x.name = expect_name();
      if (allow_namespace && is_op(".")) {
        next();
        x.attr = expect_name();
      }
      x.slot = intern(x.name);
      return x;
    };
    target first = one();
    if (!allow_tuple || !is_op(",")) return first;
    t.unpack.push_back(std::move(first));
    while (skip_op(",")) {
      if (is_name("in") || is_op("=") || cur().type == token::kind::block_end) break;
      t.unpack.push_back(one());
    }
    return t;
  }

  stmt_ptr parse_set() {
    next();
    auto tgt = parse_target(true, true);
    if (skip_op("=")) {
      auto s = new_stmt(stmt::kind::set);
      s->targets = std::move(tgt);
      s->value_expr = parse_tuple();
      expect_block_end();
      return s;
    }
    auto s = new_stmt(stmt::kind::set_block);
    s->targets = std::move(tgt);
    if (!s->targets.attr.empty() || !s->targets.unpack.empty()) fail("a block set assigns one name");
    while (is_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    s->inner = subparse({"endset"});
    next();
    expect_block_end();
    return s;
  }

  void parse_params(std::vector<macro_param>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      macro_param p;
      p.name = expect_name();
      p.slot = intern(p.name);
      if (skip_op("=")) p.default_value = parse_expression();
      params.push_back(std::move(p));
    }
    next();
  }

  stmt_ptr parse_macro() {
    auto s = new_stmt(stmt::kind::macro);
    next();
    s->name = expect_name();
    s->slot = intern(s->name);
    parse_params(s->params);
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    s->inner = subparse({"endmacro"});
    loop_depth_ = saved_loops;
    next();
    if (cur().type == token::kind::name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  stmt_ptr parse_call_block() {
    auto s = new_stmt(stmt::kind::call_block);
    next();
    if (is_op("(")) parse_params(s->params);
    s->value_expr = parse_expression();
    if (s->value_expr->k != expr::kind::call) fail("expected a call");
    expect_block_end();
    s->inner = subparse({"endcall"});
    next();
    expect_block_end();
    return s;
  }

  stmt_ptr parse_filter_block() {
    auto s = new_stmt(stmt::kind::filter_block);
    next();
    s->filters.push_back(parse_filter(nullptr, true));
    while (is_op("|")) s->filters.push_back(parse_filter(nullptr));
    expect_block_end();
    s->inner = subparse({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  stmt_ptr parse_with() {
    auto s = new_stmt(stmt::kind::with);
    next();
    while (cur().type != token::kind::block_end) {
      if (!s->assignments.empty()) expect_op(",");
      target t = parse_target(false, false);
      expect_op("=");
      s->assignments.emplace_back(std::move(t), parse_expression());
    }
    next();
    s->inner = subparse({"endwith"});
    next();
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end() const {
    const auto k = cur().type;
    if (k == token::kind::var_end || k == token::kind::block_end || k == token::kind::end) return true;
    if (k == token::kind::op && (cur().value == ")" || cur().value == "]" || cur().value == "}")) return true;
    return false;
  }

  // expression (',' expression)*: a tuple when there is a comma.
  expr_ptr parse_tuple(bool with_condexpr = true, bool explicit_parens = false, bool stop_at_if = false) {
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

  expr_ptr parse_expression() { return parse_condexpr(); }

  expr_ptr parse_condexpr() {
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

  expr_ptr parse_or() {
    expr_ptr left = parse_and();
    while (skip_name("or")) {
      auto n = make(expr::kind::logic_or);
      n->kids.push_back(std::move(left));
      n->kids.push_back(parse_and());
      left = std::move(n);
    }
    return left;
  }

  expr_ptr parse_and() {
    expr_ptr left = parse_not();
    while (skip_name("and")) {
      auto n = make(expr::kind::logic_and);
      n->kids.push_back(std::move(left));
      n->kids.push_back(parse_not());
      left = std::move(n);
    }
    return left;
  }

  expr_ptr parse_not() {
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

  expr_ptr parse_compare() {
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

  expr_ptr binary(op o, expr_ptr l, expr_ptr r) {
    auto n = make(expr::kind::binary);
    n->o = o;
    n->kids.push_back(std::move(l));
    n->kids.push_back(std::move(r));
    return n;
  }

  expr_ptr parse_math1() {
    expr_ptr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const op o = cur().value == "+" ? op::add : op::sub;
      next();
      left = binary(o, std::move(left), parse_concat());
    }
    return left;
  }

  expr_ptr parse_concat() {
    expr_ptr first = parse_math2();
    if (!is_op("~")) return first;
    auto n = make(expr::kind::concat);
    n->kids.push_back(std::move(first));
    while (skip_op("~")) n->kids.push_back(parse_math2());
    return n;
  }

  expr_ptr parse_math2() {
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

  expr_ptr parse_pow() {
    expr_ptr left = parse_unary();
    while (skip_op("**")) left = binary(op::pow, std::move(left), parse_unary());
    return left;
  }

  expr_ptr parse_unary(bool with_filter = true) {
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

  expr_ptr parse_primary() {
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

  expr_ptr parse_postfix(expr_ptr node) {
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

  expr_ptr parse_subscript(expr_ptr node) {
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
  expr_ptr parse_subscribed() {
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

  void parse_call_args(call_args_ast& a) {
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

  expr_ptr parse_call(expr_ptr node) {
    auto n = make(expr::kind::call);
    parse_call_args(n->args);
    n->kids.push_back(std::move(node));
    return n;
  }

  expr_ptr parse_filter_expr(expr_ptr node) {
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
  expr_ptr parse_filter(expr_ptr input, bool inline_start = false) {
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

  expr_ptr parse_test(expr_ptr input) {
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

  std::vector<token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int if_depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> slots_;
};

}  // namespace

program parse(std::string_view source, const lexer_options& opts) { return parser(tokenize(source, opts)).run(); }

}  // namespace tandem::jinja
