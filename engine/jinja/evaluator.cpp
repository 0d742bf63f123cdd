#include "engine/jinja/evaluator.h"

#include <algorithm>

#include "engine/jinja/builtins.h"

namespace tandem::jinja {
namespace {

constexpr int kMaxCallDepth = 100;
constexpr size_t kMaxSteps = 5'000'000;  // statements and loop iterations per render

// Undefined, "'T object' has no attribute NAME" (NAME quoted, or already a repr). Appended
// rather than "'" + std::string(...): where GCC 12 inlines that sum it reports an
// overlapping memcpy that cannot happen (a bogus -Wrestrict).
value no_attribute(std::string_view type, std::string_view name, bool quote = false) {
  std::string what = "'";
  what.append(type).append(" object' has no attribute ");
  if (quote) what.push_back('\'');
  what.append(name);
  if (quote) what.push_back('\'');
  return value::undefined(what);
}

}  // namespace

[[noreturn]] void undefined_error(const value& v) {
  const std::string& n = v.undefined_name();
  throw render_error(n.empty() ? "value is undefined" : (n[0] == '\'' ? n : "'" + n + "' is undefined"));
}

const value* arguments::get(size_t pos, std::string_view name) const {
  if (pos < positional.size()) return &positional[pos];
  for (const auto& [k, v] : keywords) {
    if (k == name) return &v;
  }
  return nullptr;
}

void arguments::check(const char* fn, size_t max_positional, std::initializer_list<std::string_view> names) const {
  if (positional.size() > max_positional) {
    throw render_error(std::string(fn) + "() takes at most " + std::to_string(max_positional) +
                       " positional arguments");
  }
  for (const auto& [k, v] : keywords) {
    if (std::find(names.begin(), names.end(), k) == names.end()) {
      throw render_error(std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
    }
  }
}

std::vector<value> iterate(const value& v) {
  switch (v.type()) {
    case value::kind::undefined:
      return {};
    case value::kind::array:
      return v.items();
    case value::kind::object: {
      std::vector<value> keys;
      keys.reserve(v.obj().entries.size());
      for (const auto& [k, x] : v.obj().entries) keys.push_back(k);
      return keys;
    }
    case value::kind::string: {
      std::vector<value> chars;
      const auto b = py::boundaries(v.text());
      chars.reserve(b.size());
      for (size_t i = 0; i + 1 < b.size(); ++i) chars.push_back(py::substring(v, b[i], b[i + 1]));
      return chars;
    }
    default:
      throw render_error("'" + std::string(v.type_name()) + "' object is not iterable");
  }
}

evaluator::evaluator(const program& p, std::optional<std::time_t> now) : prog_(p), now_(now) {
  for (size_t s = 0; s < p.names.size(); ++s) {
    const std::string& n = p.names[s];
    int* slot = n == "loop"      ? &loop_slot_
                : n == "varargs" ? &varargs_slot_
                : n == "kwargs"  ? &kwargs_slot_
                : n == "caller"  ? &caller_slot_
                                 : nullptr;
    if (slot != nullptr) *slot = static_cast<int>(s);
  }
}

std::time_t evaluator::now() const { return now_ ? *now_ : std::time(nullptr); }

string_data evaluator::render(const std::vector<std::pair<std::string, value>>& vars) {
  for (const auto& [name, v] : vars) {
    // Only the names the template mentions can be looked up.
    const auto it = std::find(prog_.names.begin(), prog_.names.end(), name);
    if (it != prog_.names.end()) root_.set(static_cast<int>(it - prog_.names.begin()), v);
  }
  string_builder out;
  exec_body(prog_.root, root_, out);
  return out.take_data();
}

evaluator::flow evaluator::exec_body(const body& b, frame& f, string_builder& out) {
  for (const auto& s : b) {
    const flow r = exec(*s, f, out);
    if (r != flow::normal) return r;
  }
  return flow::normal;
}

evaluator::flow evaluator::exec(const stmt& s, frame& f, string_builder& out) {
  if (++steps_ > kMaxSteps) throw render_error("the template ran too long");
  switch (s.k) {
    case stmt::kind::text:
      out.append_text(s.text);
      break;
    case stmt::kind::output: {
      const value v = eval(*s.value_expr, f);
      out.append(v);
      break;
    }
    case stmt::kind::if_:
      for (const auto& [cond, b] : s.branches) {
        if (!cond || eval(*cond, f).truthy()) return exec_body(b, f, out);
      }
      break;
    case stmt::kind::for_:
      exec_for(s, f, out);
      break;
    case stmt::kind::set:
      assign(s.targets, eval(*s.value_expr, f), f);
      break;
    case stmt::kind::set_block: {
      string_builder inner;
      exec_body(s.inner, f, inner);
      assign(s.targets, apply_filters(s.filters, inner.take(), f), f);
      break;
    }
    case stmt::kind::filter_block: {
      string_builder inner;
      exec_body(s.inner, f, inner);
      out.append(apply_filters(s.filters, inner.take(), f));
      break;
    }
    case stmt::kind::macro: {
      const stmt* m = &s;
      f.set(s.slot, value::callable(s.name, [this, m](arguments& a) { return call_macro(*m, a, nullptr); }));
      break;
    }
    case stmt::kind::call_block: {
      const stmt* blk = &s;
      frame* defining = &f;
      const value caller = value::callable("caller", [this, blk, defining](arguments& a) {
        frame cf;
        cf.parent = defining;
        for (size_t i = 0; i < blk->params.size(); ++i) {
          const value* v = a.get(i, blk->params[i].name);
          cf.set(blk->params[i].slot, v                              ? *v
                                      : blk->params[i].default_value ? eval(*blk->params[i].default_value, cf)
                                                                     : value::undefined(blk->params[i].name));
        }
        string_builder b;
        exec_body(blk->inner, cf, b);
        return b.take();
      });
      const expr& c = *s.value_expr;
      const value callee = eval(*c.kids[0], f);
      arguments args;
      eval_args(c.args, f, args);
      args.keywords.emplace_back("caller", caller);
      out.append(call(callee, args));
      break;
    }
    case stmt::kind::with: {
      frame inner;
      inner.parent = &f;
      for (const auto& [t, e] : s.assignments) assign(t, eval(*e, f), inner);
      return exec_body(s.inner, inner, out);
    }
    case stmt::kind::break_:
      return flow::break_;
    case stmt::kind::continue_:
      return flow::continue_;
  }
  if (out.size() > kMaxRenderedBytes) throw render_error("the rendered text is too large");
  return flow::normal;
}

void evaluator::exec_for(const stmt& s, frame& f, string_builder& out) {
  std::vector<value> items = iterate(eval(*s.value_expr, f));
  if (s.condition) {
    std::vector<value> kept;
    for (auto& x : items) {
      frame probe;
      probe.parent = &f;
      assign(s.targets, x, probe);
      if (eval(*s.condition, probe).truthy()) kept.push_back(std::move(x));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(s.else_body, f, out);
    return;
  }
  const int loop_slot = loop_slot_;
  auto state = std::make_shared<loop_data>();
  state->length = items.size();
  state->items = &items;
  const value loop_value = value::loop(state);
  for (size_t i = 0; i < items.size(); ++i) {
    if (++steps_ > kMaxSteps) throw render_error("the template ran too long");
    state->index0 = i;
    frame iter;
    iter.parent = &f;
    iter.vars.reserve(4);
    if (loop_slot >= 0) iter.set(loop_slot, loop_value);
    assign(s.targets, items[i], iter);
    if (exec_body(s.inner, iter, out) == flow::break_) break;
  }
  state->items = nullptr;
}

void evaluator::assign(const target& t, value v, frame& f) {
  if (!t.unpack.empty()) {
    const std::vector<value> parts = iterate(v);
    if (parts.size() != t.unpack.size()) {
      throw render_error("cannot unpack " + std::to_string(parts.size()) + " values into " +
                         std::to_string(t.unpack.size()) + " names");
    }
    for (size_t i = 0; i < parts.size(); ++i) assign(t.unpack[i], parts[i], f);
    return;
  }
  if (!t.attr.empty()) {
    value* ns = nullptr;
    for (frame* p = &f; p != nullptr && ns == nullptr; p = p->parent) ns = p->find(t.slot);
    if (ns == nullptr || !ns->is_object() || !ns->obj().is_namespace) {
      throw render_error("cannot assign attribute on non-namespace object");
    }
    ns->mutable_obj().set(value(t.attr), std::move(v));
    return;
  }
  f.set(t.slot, std::move(v));
}

value evaluator::lookup(const expr& e, frame& f) {
  for (frame* p = &f; p != nullptr; p = p->parent) {
    if (value* v = p->find(e.slot)) return *v;
  }
  if (&f != &root_) {
    if (value* v = root_.find(e.slot)) return *v;
  }
  if (is_global(e.name)) return global(e.name);
  return value::undefined(e.name);
}

value evaluator::global(std::string_view name) {
  std::string n(name);
  return value::callable(n, [this, n](arguments& a) {
    bool found = true;
    return call_global(*this, n, a, found);
  });
}

value evaluator::apply_filters(const std::vector<expr_ptr>& filters, value v, frame& f) {
  for (const auto& flt : filters) {
    arguments args;
    eval_args(flt->args, f, args);
    if (flt->filter == nullptr) throw render_error("no filter named '" + flt->name + "'");
    v = flt->filter(*this, v, args);
  }
  return v;
}

void evaluator::eval_args(const call_args_ast& a, frame& f, arguments& out) {
  out.positional.reserve(a.positional.size());
  for (const auto& p : a.positional) out.positional.push_back(eval(*p, f));
  if (a.star_args) {
    for (auto& x : iterate(eval(*a.star_args, f))) out.positional.push_back(std::move(x));
  }
  for (const auto& [k, p] : a.keywords) out.keywords.emplace_back(k, eval(*p, f));
  if (a.star_kwargs) {
    const value kw = eval(*a.star_kwargs, f);
    if (!kw.is_object()) throw render_error("argument after ** must be a mapping");
    for (const auto& [k, x] : kw.obj().entries) out.keywords.emplace_back(k.str(), x);
  }
}

value evaluator::get_attr(const value& obj, std::string_view name) {
  switch (obj.type()) {
    case value::kind::undefined:
      undefined_error(obj);
    case value::kind::object: {
      if (!obj.obj().is_namespace && has_method(obj, name)) break;
      if (const value* v = obj.obj().find(name)) return *v;
      return value::undefined("'" + std::string(obj.obj().is_namespace ? "Namespace" : "dict") +
                              " object' has no attribute '" + std::string(name) + "'");
    }
    case value::kind::loop: {
      const loop_data& l = obj.loop_info();
      const auto n = static_cast<int64_t>(l.length);
      const auto i = static_cast<int64_t>(l.index0);
      if (name == "index") return value(i + 1);
      if (name == "index0") return value(i);
      if (name == "revindex") return value(n - i);
      if (name == "revindex0") return value(n - i - 1);
      if (name == "first") return value(i == 0);
      if (name == "last") return value(i + 1 == n);
      if (name == "length") return value(n);
      if (name == "depth") return value(static_cast<int64_t>(l.depth0 + 1));
      if (name == "depth0") return value(static_cast<int64_t>(l.depth0));
      if (name == "previtem") {
        if (i == 0 || l.items == nullptr) return value::undefined("there is no previous item");
        return (*l.items)[static_cast<size_t>(i - 1)];
      }
      if (name == "nextitem") {
        if (i + 1 >= n || l.items == nullptr) return value::undefined("there is no next item");
        return (*l.items)[static_cast<size_t>(i + 1)];
      }
      if (name == "cycle") break;
      return value::undefined("'LoopContext object' has no attribute '" + std::string(name) + "'");
    }
    case value::kind::string:
    case value::kind::array:
      if (has_method(obj, name)) break;
      return no_attribute(obj.type_name(), name, true);
    default:
      return no_attribute(obj.type_name(), name, true);
  }
  // A bound method.
  std::string n(name);
  return value::callable(n, [this, obj, n](arguments& a) {
    bool found = true;
    value r = call_method(*this, obj, n, a, found);
    if (!found) throw render_error("'" + std::string(obj.type_name()) + "' object has no method '" + n + "'");
    return r;
  });
}

value evaluator::get_item(const value& obj, const value& key) {
  switch (obj.type()) {
    case value::kind::undefined:
      undefined_error(obj);
    case value::kind::object:
      if (!obj.obj().is_namespace) {
        for (const auto& [k, v] : obj.obj().entries) {
          if (k.equals(key)) return v;
        }
      }
      break;
    case value::kind::array:
      if (obj.is_generator()) return value::undefined("'generator' object is not subscriptable");
      if (key.is_int() || key.is_bool()) {
        const auto& xs = obj.items();
        int64_t i = key.as_int();
        if (i < 0) i += static_cast<int64_t>(xs.size());
        if (i >= 0 && static_cast<size_t>(i) < xs.size()) return xs[static_cast<size_t>(i)];
        return value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute " + key.str());
      }
      break;
    case value::kind::string:
      if (key.is_int() || key.is_bool()) {
        const auto b = py::boundaries(obj.text());
        const auto n = static_cast<int64_t>(b.size() - 1);
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i >= 0 && i < n) return py::substring(obj, b[static_cast<size_t>(i)], b[static_cast<size_t>(i) + 1]);
        return value::undefined("'str object' has no attribute " + key.str());
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.text());
  return no_attribute(obj.type_name(), key.repr());
}

value evaluator::call(const value& callee, arguments& args) {
  if (callee.is_callable()) {
    if (++depth_ > kMaxCallDepth) throw render_error("maximum call depth exceeded");
    struct undepth {
      int& d;
      ~undepth() { --d; }
    } guard{depth_};
    return callee.fn().call(args);
  }
  if (callee.is_undefined()) undefined_error(callee);
  throw render_error("'" + std::string(callee.type_name()) + "' object is not callable");
}

value evaluator::call_macro(const stmt& m, arguments& args, const value* caller) {
  frame mf;
  mf.parent = &root_;
  size_t used_positional = 0;
  for (size_t i = 0; i < m.params.size(); ++i) {
    const macro_param& p = m.params[i];
    const value* v = args.get(i, p.name);
    if (i < args.positional.size()) ++used_positional;
    if (v != nullptr) {
      mf.set(p.slot, *v);
    } else if (p.default_value) {
      mf.set(p.slot, eval(*p.default_value, mf));
    } else {
      mf.set(p.slot, value::undefined(p.name));
    }
  }
  std::vector<value> varargs(args.positional.begin() + static_cast<std::ptrdiff_t>(used_positional),
                             args.positional.end());
  std::vector<std::pair<value, value>> kwargs;
  for (const auto& [k, v] : args.keywords) {
    bool is_param = k == "caller";
    for (const auto& p : m.params) is_param |= p.name == k;
    if (!is_param) kwargs.emplace_back(value(k), v);
  }
  if (varargs_slot_ >= 0) mf.set(varargs_slot_, value::array(std::move(varargs), true));
  if (kwargs_slot_ >= 0) mf.set(kwargs_slot_, value::object(std::move(kwargs)));
  if (caller_slot_ >= 0) {
    const value* c = caller != nullptr ? caller : args.get(SIZE_MAX, "caller");
    if (c != nullptr) mf.set(caller_slot_, *c);
  }
  string_builder out;
  exec_body(m.inner, mf, out);
  return out.take();
}

value evaluator::eval_call(const expr& e, frame& f) {
  const expr& callee = *e.kids[0];
  arguments args;
  if (callee.k == expr::kind::getattr) {
    const value obj = eval(*callee.kids[0], f);
    if ((obj.is_string() || obj.is_array() || (obj.is_object() && !obj.obj().is_namespace) ||
         obj.type() == value::kind::loop) &&
        (has_method(obj, callee.name) || (obj.type() == value::kind::loop && callee.name == "cycle"))) {
      eval_args(e.args, f, args);
      bool found = true;
      return call_method(*this, obj, callee.name, args, found);
    }
    const value fn = get_attr(obj, callee.name);
    eval_args(e.args, f, args);
    return call(fn, args);
  }
  if (callee.k == expr::kind::name) {
    bool local = false;
    for (frame* p = &f; p != nullptr && !local; p = p->parent) local = p->find(callee.slot) != nullptr;
    if (!local && root_.find(callee.slot) == nullptr && is_global(callee.name)) {
      eval_args(e.args, f, args);
      bool found = true;
      return call_global(*this, callee.name, args, found);
    }
  }
  const value fn = eval(callee, f);
  eval_args(e.args, f, args);
  return call(fn, args);
}

value evaluator::eval(const expr& e, frame& f) {
  switch (e.k) {
    case expr::kind::literal:
      return e.lit;
    case expr::kind::name:
      return lookup(e, f);
    case expr::kind::list:
    case expr::kind::tuple: {
      std::vector<value> xs;
      xs.reserve(e.kids.size());
      for (const auto& k : e.kids) xs.push_back(eval(*k, f));
      return value::array(std::move(xs), e.k == expr::kind::tuple);
    }
    case expr::kind::dict: {
      value d = value::object();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2)
        d.mutable_obj().set(eval(*e.kids[i], f), eval(*e.kids[i + 1], f));
      return d;
    }
    case expr::kind::getattr:
      return get_attr(eval(*e.kids[0], f), e.name);
    case expr::kind::getitem:
      return get_item(eval(*e.kids[0], f), eval(*e.kids[1], f));
    case expr::kind::slice: {
      const value obj = eval(*e.kids[0], f);
      std::optional<int64_t> bound[3];
      for (int i = 0; i < 3; ++i) {
        if (!e.kids[i + 1]) continue;
        const value b = eval(*e.kids[i + 1], f);
        if (b.is_none()) continue;
        if (!b.is_int() && !b.is_bool()) throw render_error("slice indices must be integers or None");
        bound[i] = b.as_int();
      }
      if (obj.is_string()) return py::slice(obj, bound[0], bound[1], bound[2]);
      if (obj.is_array() && !obj.is_generator()) {
        const auto& xs = obj.items();
        const auto n = static_cast<int64_t>(xs.size());
        const int64_t st = bound[2].value_or(1);
        if (st == 0) throw render_error("ValueError: slice step cannot be zero");
        const auto clamp = [&](std::optional<int64_t> v, int64_t dflt) -> int64_t {
          if (!v) return dflt;
          int64_t x = *v < 0 ? *v + n : *v;
          return st > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
        };
        const int64_t b = clamp(bound[0], st > 0 ? 0 : n - 1), end = clamp(bound[1], st > 0 ? n : -1);
        std::vector<value> out;
        for (int64_t i = b; st > 0 ? i < end : i > end; i += st) out.push_back(xs[static_cast<size_t>(i)]);
        return value::array(std::move(out), obj.is_tuple());
      }
      if (obj.is_undefined()) undefined_error(obj);
      return value::undefined("'" + std::string(obj.type_name()) + "' object is not subscriptable");
    }
    case expr::kind::call:
      return eval_call(e, f);
    case expr::kind::filter: {
      const value in = eval(*e.kids[0], f);
      arguments args;
      eval_args(e.args, f, args);
      if (e.filter == nullptr) throw render_error("no filter named '" + e.name + "'");
      return e.filter(*this, in, args);
    }
    case expr::kind::test: {
      const value in = eval(*e.kids[0], f);
      arguments args;
      eval_args(e.args, f, args);
      if (e.test == nullptr) throw render_error("no test named '" + e.name + "'");
      return value(e.test(*this, in, args) != e.negated);
    }
    case expr::kind::unary: {
      const value v = eval(*e.kids[0], f);
      if (e.o == op::not_) return value(!v.truthy());
      if (!v.is_number()) {
        if (v.is_undefined()) undefined_error(v);
        throw render_error("bad operand type for unary " + std::string(e.o == op::neg ? "-" : "+") + ": '" +
                           std::string(v.type_name()) + "'");
      }
      if (e.o == op::pos) return v.is_bool() ? value(v.as_int()) : v;
      return v.is_float() ? value(-v.as_double()) : value(-v.as_int());
    }
    case expr::kind::binary:
      return eval_binary(e.o, eval(*e.kids[0], f), eval(*e.kids[1], f));
    case expr::kind::compare: {
      value left = eval(*e.kids[0], f);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        value right = eval(*e.kids[i + 1], f);
        if (!eval_compare(e.ops[i], left, right)) return value(false);
        left = std::move(right);
      }
      return value(true);
    }
    case expr::kind::logic_and: {
      value a = eval(*e.kids[0], f);
      return a.truthy() ? eval(*e.kids[1], f) : a;
    }
    case expr::kind::logic_or: {
      value a = eval(*e.kids[0], f);
      return a.truthy() ? a : eval(*e.kids[1], f);
    }
    case expr::kind::cond:
      if (eval(*e.kids[0], f).truthy()) return eval(*e.kids[1], f);
      return e.kids[2] ? eval(*e.kids[2], f) : value::undefined();
    case expr::kind::concat: {
      string_builder s;
      for (const auto& k : e.kids) s.append(eval(*k, f));
      return s.take();
    }
  }
  return {};
}

value evaluator::apply_filter(std::string_view name, const value& input, arguments& args) {
  const filter_fn fn = find_filter(name);
  if (fn == nullptr) throw render_error("no filter named '" + std::string(name) + "'");
  return fn(*this, input, args);
}

bool evaluator::apply_test(std::string_view name, const value& input, arguments& args) {
  const test_fn fn = find_test(name);
  if (fn == nullptr) throw render_error("no test named '" + std::string(name) + "'");
  return fn(*this, input, args);
}

}  // namespace tandem::jinja
