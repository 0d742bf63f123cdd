// The filters, tests, methods and global functions templates call, by name.
#pragma once

#include <cstddef>
#include <string_view>

#include "engine/jinja/ast.h"
#include "engine/jinja/evaluator.h"

namespace tandem::jinja {

filter_fn find_filter(std::string_view name);
test_fn find_test(std::string_view name);

// obj.name(args) for the methods of str, dict and list; sets `found` false when `obj` has no
// such method (the caller then treats the attribute as undefined).
value call_method(evaluator& ev, const value& obj, std::string_view name, arguments& args, bool& found);
// Whether `obj.name` names a method (so getattr yields a bound method, not a dict key).
bool has_method(const value& obj, std::string_view name);

// Global functions (range, namespace, dict, raise_exception, strftime_now, joiner, cycler);
// found false when `name` is none of them.
value call_global(evaluator& ev, std::string_view name, arguments& args, bool& found);
bool is_global(std::string_view name);

// Python's len(); throws render_error for values without one.
int64_t py_len(const value& v);
// markupsafe.escape(): & < > " ' as entities, the result Markup (Markup passes through).
value html_escape(const value& v);
// Markup + x with x escaped.
value markup_concat(const value& a, const value& b);

// The bound on a render's output, and on what one repetition (`'ab' * n`) may make.
inline constexpr size_t kMaxRenderedBytes = 64u << 20;
// Throws the render_error that naming an undefined value gives ("'x' is undefined").
[[noreturn]] void undefined_error(const value& v);

}  // namespace tandem::jinja
