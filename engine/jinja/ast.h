// The parsed template: expression and statement trees, built once by the parser and then
// only read by the evaluator (so one compiled template renders on many threads at once).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/jinja/value.h"

namespace tandem::jinja {

enum class op : uint8_t {
  add,
  sub,
  mul,
  div,
  floordiv,
  mod,
  pow,  // arithmetic
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  in,
  not_in,  // comparison
  neg,
  pos,
  not_,  // unary
};

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct call_args_ast {
  std::vector<expr_ptr> positional;
  std::vector<std::pair<std::string, expr_ptr>> keywords;
  expr_ptr star_args;    // *args
  expr_ptr star_kwargs;  // **kwargs
};

class evaluator;
struct arguments;
using filter_fn = value (*)(evaluator&, const value&, arguments&);
using test_fn = bool (*)(evaluator&, const value&, arguments&);

struct expr {
  enum class kind : uint8_t {
    literal,  // lit
    name,     // name, slot
    list,     // kids
    tuple,    // kids
    dict,     // kids: key, value, key, value, ...
    getattr,  // kids[0].name
    getitem,  // kids[0][kids[1]]
    slice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids for absent bounds)
    call,     // kids[0](args)
    filter,   // kids[0] | name(args); kids[0] null in a filter block
    test,     // kids[0] is [not] name(args)
    unary,    // o kids[0]
    binary,   // kids[0] o kids[1]
    compare,  // kids[0] ops[0] kids[1] ops[1] kids[2] ...
    logic_and,
    logic_or,
    cond,    // kids[1] if kids[0] else kids[2] (kids[2] null: undefined)
    concat,  // kids joined with ~
  };
  kind k;
  int line = 0;
  op o = op::add;
  bool negated = false;  // test: `is not`
  int slot = -1;         // name: its interned id
  std::string name;      // name, attribute, filter or test name
  value lit;
  std::vector<expr_ptr> kids;
  std::vector<op> ops;
  call_args_ast args;
  filter_fn filter = nullptr;  // resolved at parse time (null: unknown, fails when reached)
  test_fn test = nullptr;
};

// Where a `set` or `for` stores: a name, a namespace attribute (`ns.x`), or a tuple of names.
struct target {
  int slot = -1;
  std::string name;
  std::string attr;  // non-empty for ns.attr
  std::vector<target> unpack;
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using body = std::vector<stmt_ptr>;

struct macro_param {
  int slot;
  std::string name;
  expr_ptr default_value;  // may be null
};

struct stmt {
  enum class kind : uint8_t {
    text,          // text
    output,        // {{ value }}
    if_,           // branches: (condition, body); the else branch has a null condition
    for_,          // for targets in value [if condition] ... [else else_body]
    set,           // set targets = value
    set_block,     // set targets %}body{% endset (filtered by `filters`)
    macro,         // macro name(params) body
    call_block,    // call(params) value %}body: `caller()` renders body
    filter_block,  // filter `filters` %}body
    with,          // with assignments %}body
    break_,
    continue_,
  };
  kind k;
  int line = 0;
  std::string text;
  expr_ptr value_expr;
  expr_ptr condition;
  std::vector<std::pair<expr_ptr, body>> branches;
  target targets;
  std::vector<std::pair<target, expr_ptr>> assignments;  // with
  std::vector<expr_ptr> filters;                         // filter nodes with a null input
  body inner;
  body else_body;
  std::string name;  // macro
  int slot = -1;
  std::vector<macro_param> params;
};

// A compiled template: its statements and the names it uses (slots index `names`).
struct program {
  body root;
  std::vector<std::string> names;
};

}  // namespace tandem::jinja
