#include "engine/jinja/parser.h"

#include "engine/jinja/parser_state.h"

namespace tandem::jinja {
namespace detail {

program parser::run() {
  program p;
  p.root = subparse({});
  if (cur().type != token::kind::end) fail("unexpected '" + cur().value + "'");
  p.names = std::move(names_);
  return p;
}

// Statements up to a block whose first name is one of `ends` (left unconsumed, at the
// name), or to the end of the template.
body parser::subparse(std::initializer_list<std::string_view> ends) {
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

stmt_ptr parser::new_stmt(stmt::kind k) {
  auto s = std::make_unique<stmt>();
  s->k = k;
  s->line = cur().line;
  return s;
}

stmt_ptr parser::parse_statement() {
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

stmt_ptr parser::parse_if() {
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

stmt_ptr parser::parse_for() {
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

target parser::parse_target(bool allow_tuple, bool allow_namespace) {
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

stmt_ptr parser::parse_set() {
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

void parser::parse_params(std::vector<macro_param>& params) {
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

stmt_ptr parser::parse_macro() {
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

stmt_ptr parser::parse_call_block() {
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

stmt_ptr parser::parse_filter_block() {
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

stmt_ptr parser::parse_with() {
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

}  // namespace detail

program parse(std::string_view source, const lexer_options& opts) {
  return detail::parser(tokenize(source, opts)).run();
}

}  // namespace tandem::jinja
