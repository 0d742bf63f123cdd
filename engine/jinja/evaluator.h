// Walks a program (ast.h) over a context of variables and writes the rendered text.
//
// Scopes follow jinja2: the top level and `if` share one frame; each loop iteration, macro
// call and `with` block gets a fresh frame whose assignments vanish when it ends (templates
// carry state out of loops with namespace()). Macros see their arguments and the top level.
//
//   root frame (context variables, top-level set/macro)
//     <- iteration frame (loop target, `loop`, sets inside the body)
//          <- iteration frame of a nested loop ...
//   root frame <- macro frame (parameters, caller)
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/jinja/ast.h"
#include "engine/jinja/py_string.h"
#include "engine/jinja/value.h"

namespace tandem::jinja {

// Evaluated call arguments, with Python-style lookup by position or keyword.
struct arguments {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> keywords;

  // The argument at `pos` or named `name`; nullptr when neither was given.
  const value* get(size_t pos, std::string_view name) const;
  // Throws render_error when more than `max_positional` positional arguments or a keyword
  // outside `names` was given (`fn` names the callee in the message).
  void check(const char* fn, size_t max_positional, std::initializer_list<std::string_view> names) const;
};

struct frame {
  frame* parent = nullptr;
  std::vector<std::pair<int, value>> vars;

  value* find(int slot) {
    for (auto& [s, v] : vars) {
      if (s == slot) return &v;
    }
    return nullptr;
  }
  void set(int slot, value v) {
    if (value* old = find(slot)) {
      *old = std::move(v);
    } else {
      vars.emplace_back(slot, std::move(v));
    }
  }
};

class evaluator {
 public:
  evaluator(const program& p, std::optional<std::time_t> now);

  // Renders the program with `vars` bound at the top level.
  string_data render(const std::vector<std::pair<std::string, value>>& vars);

  value eval(const expr& e, frame& f);
  // jinja2's environment.getattr / getitem.
  value get_attr(const value& obj, std::string_view name);
  value get_item(const value& obj, const value& key);
  value call(const value& callee, arguments& args);
  // A filter or test by name, as map()/select() apply them.
  value apply_filter(std::string_view name, const value& input, arguments& args);
  bool apply_test(std::string_view name, const value& input, arguments& args);
  std::time_t now() const;

 private:
  enum class flow { normal, break_, continue_ };

  flow exec_body(const body& b, frame& f, string_builder& out);
  flow exec(const stmt& s, frame& f, string_builder& out);
  void exec_for(const stmt& s, frame& f, string_builder& out);
  void assign(const target& t, value v, frame& f);
  value lookup(const expr& name, frame& f);
  value eval_call(const expr& e, frame& f);
  void eval_args(const call_args_ast& a, frame& f, arguments& out);
  value eval_binary(op o, const value& a, const value& b);
  bool eval_compare(op o, const value& a, const value& b);
  value call_macro(const stmt& m, arguments& args, const value* caller);
  value global(std::string_view name);
  value apply_filters(const std::vector<expr_ptr>& filters, value v, frame& f);

  const program& prog_;
  std::optional<std::time_t> now_;
  frame root_;
  int depth_ = 0;                                                                 // macro call depth (bounded)
  int loop_slot_ = -1, varargs_slot_ = -1, kwargs_slot_ = -1, caller_slot_ = -1;  // -1: unused names
  size_t steps_ = 0;                                                              // statements executed (bounded)
};

// Iteration as Python's iter(): items of a list, keys of a dict, characters of a string,
// nothing for undefined. Throws render_error for what does not iterate.
std::vector<value> iterate(const value& v);

}  // namespace tandem::jinja
