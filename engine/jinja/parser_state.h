// The Jinja parser's state (parser.h's one entry point runs it): the token cursor and its
// helpers, the nesting guard, the variable slots. Its statements are in parser.cpp, its
// expressions in parser_expressions.cpp. Private to engine/jinja.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/jinja/ast.h"
#include "engine/jinja/lexer.h"

namespace tandem::jinja::detail {

inline constexpr int kMaxNesting = 200;  // expression and block depth (bounds the recursion)

class parser {
 public:
  explicit parser(std::vector<token> tokens) : t_(std::move(tokens)) {}

  program run();

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

  // statements (parser.cpp)
  body subparse(std::initializer_list<std::string_view> ends);
  stmt_ptr new_stmt(stmt::kind k);
  stmt_ptr parse_statement();
  stmt_ptr parse_if();
  stmt_ptr parse_for();
  target parse_target(bool allow_tuple, bool allow_namespace);
  stmt_ptr parse_set();
  void parse_params(std::vector<macro_param>& params);
  stmt_ptr parse_macro();
  stmt_ptr parse_call_block();
  stmt_ptr parse_filter_block();
  stmt_ptr parse_with();

  // expressions (parser_expressions.cpp)
  bool is_tuple_end() const;
  expr_ptr parse_tuple(bool with_condexpr = true, bool explicit_parens = false, bool stop_at_if = false);
  expr_ptr parse_expression();
  expr_ptr parse_condexpr();
  expr_ptr parse_or();
  expr_ptr parse_and();
  expr_ptr parse_not();
  expr_ptr parse_compare();
  expr_ptr binary(op o, expr_ptr l, expr_ptr r);
  expr_ptr parse_math1();
  expr_ptr parse_concat();
  expr_ptr parse_math2();
  expr_ptr parse_pow();
  expr_ptr parse_unary(bool with_filter = true);
  expr_ptr parse_primary();
  expr_ptr parse_postfix(expr_ptr node);
  expr_ptr parse_subscript(expr_ptr node);
  expr_ptr parse_subscribed();
  void parse_call_args(call_args_ast& a);
  expr_ptr parse_call(expr_ptr node);
  expr_ptr parse_filter_expr(expr_ptr node);
  expr_ptr parse_filter(expr_ptr input, bool inline_start = false);
  expr_ptr parse_test(expr_ptr input);

  std::vector<token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int if_depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> slots_;
};

}  // namespace tandem::jinja::detail
