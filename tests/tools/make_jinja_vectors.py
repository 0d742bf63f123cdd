#!/usr/bin/env python3
"""Writes tests/data/jinja/constructs.json: small templates, one or a few Jinja constructs
each, rendered by jinja2 in the environment Hugging Face transformers renders chat templates
in (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls, the generation
tag, raise_exception, strftime_now on a fixed clock, tojson as json.dumps). The C++ test
tests/unit/jinja_test.cpp renders each with Tandem's interpreter and compares; a case that
jinja2 rejects must fail in Tandem too.

    pip install jinja2   (see tests/requirements.txt)
    python3 tests/tools/make_jinja_vectors.py
"""
import datetime
import json
import pathlib
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "jinja" / "constructs.json"
NOW = 1753531200  # 2025-07-26 12:00:00 UTC, the clock strftime_now reads in these cases


class GenerationTag(Extension):
    """transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(source, variables):
    return hf_environment().from_string(source).render(**variables)


MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather now",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

# (name, source, variables)
CASES = [
    # text and whitespace control
    ("text", "plain text", {}),
    ("trailing_newline_dropped", "a\n", {}),
    ("crlf_normalised", "a\r\nb\rc", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "line\n    {% if true %}\n    body\n    {% endif %}\nend", {}),
    ("lstrip_not_for_variables", "a\n    {{ 'x' }}\n", {}),
    ("minus_strips", "a   {%- if true -%}   b   {%- endif -%}   c", {}),
    ("minus_on_variables", "a \n {{- 'x' -}} \n b", {}),
    ("plus_keeps_lstrip", "a\n    {%+ if true %}x{% endif %}", {}),
    ("plus_keeps_trim", "{% if true +%}\nx{% endif %}", {}),
    ("comment", "a {# note #} b\n  {# own line #}\nc", {}),
    ("comment_minus", "a  {#- note -#}  b", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("tag_at_start_lstrip", "   {% if true %}x{% endif %}", {}),
    ("text_before_tag_not_space", "ab {% if true %}x{% endif %}", {}),
    # literals and operators
    ("literals", "{{ 1 }} {{ 1.5 }} {{ 'a' }} {{ \"b\" }} {{ true }} {{ True }} {{ none }} {{ None }} {{ [1, 'x'] }} {{ {'k': 1} }} {{ (1,) }} {{ (1, 2) }}", {}),
    ("string_escapes", "{{ 'a\\nb\\t\\'q\\' \\u00e9 \\x41 \\\\' }}", {}),
    ("adjacent_strings_join", "{{ 'a' 'b' }}", {}),
    ("float_repr", "{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 2.0 }} {{ 1e16 }} {{ 123456789.0 }} {{ 0.0001 }} {{ -0.5 }}", {}),
    ("arithmetic", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 1.5 }}", {}),
    ("string_ops", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 'x' ~ 1 ~ none ~ true }} {{ [1] + [2] }}", {}),
    ("percent_format", "{{ '%s-%d-%05.2f-%r' % ('a', 3, 2.5, 'q') }} {{ '%(x)s' % {'x': 1} }} {{ '%%' % () }}", {}),
    ("comparisons", "{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 2 >= 2 }} {{ none == none }}", {}),
    ("in_operator", "{{ 'a' in 'abc' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }}", {}),
    ("logic_returns_operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ not 0 }} {{ not 'a' }} {{ none or [] }}", {}),
    ("conditional_expression", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}]", {}),
    ("unary", "{{ -3 }} {{ +3 }} {{ -(1 + 2) }} {{ - 2 ** 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 + 2 }} {{ not true and false }} {{ 2 * 3 ~ 'x' }}", {}),
    ("type_error_add", "{{ 1 + 'a' }}", {}),
    ("division_by_zero", "{{ 1 / 0 }}", {}),
    # variables, attributes, items, slices
    ("attribute_and_item", "{{ m.role }} {{ m['content'] }} {{ m.missing }}|{{ m['missing'] }}|", {"m": MSGS[0]}),
    ("list_index", "{{ xs[0] }} {{ xs[-1] }} [{{ xs[9] }}]", {"xs": [1, 2, 3]}),
    ("slices", "{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ s[1:3] }} {{ s[-2:] }} {{ s[::-1] }}", {"xs": [1, 2, 3, 4], "s": "héllo"}),
    ("string_index_code_points", "{{ s[1] }} {{ s | length }} {{ s[-1] }}", {"s": "héllo🦙"}),
    ("dict_method_attribute_wins", "{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }}", {"d": {"a": 1, "b": 2}}),
    ("dict_get", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }}", {"d": {"a": 1}}),
    ("nested_access", "{{ messages[1]['content'] }} {{ messages[0].role | upper }}", {"messages": MSGS}),
    ("index_on_empty_list", "{{ messages[0]['role'] }}", {"messages": []}),
    # undefined and none
    ("undefined_prints_empty", "[{{ nothing }}]", {}),
    ("undefined_tests", "{{ nothing is defined }} {{ nothing is undefined }} {{ nothing is none }} {{ nothing is iterable }}", {}),
    ("undefined_attribute_fails", "{{ nothing.attr }}", {}),
    ("undefined_add_fails", "{{ nothing + 'a' }}", {}),
    ("undefined_concat_ok", "[{{ nothing ~ 'a' }}]", {}),
    ("undefined_iterates_empty", "{% for x in nothing %}x{% else %}empty{% endfor %}", {}),
    ("undefined_equality", "{{ nothing == nothing }} {{ nothing == none }} {{ nothing != 1 }}", {}),
    ("undefined_truthiness", "{% if nothing %}t{% else %}f{% endif %} {{ not nothing }}", {}),
    ("undefined_length", "{{ nothing | length }}", {}),
    ("undefined_default", "{{ nothing | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ 0 | default('d', boolean=true) }}", {}),
    ("undefined_tojson_fails", "{{ nothing | tojson }}", {}),
    ("none_attribute_is_undefined", "{{ none.attr is defined }}", {}),
    ("none_prints", "{{ none }} {{ none | string }} {{ none | trim }}", {}),
    ("none_length_fails", "{{ none | length }}", {}),
    ("none_iteration_fails", "{% for x in none %}{% endfor %}", {}),
    ("none_in_string_fails", "{{ none in 'abc' }}", {}),
    ("undefined_compare_fails", "{{ nothing < 1 }}", {}),
    ("undefined_call_fails", "{{ nothing() }}", {}),
    # tests
    ("tests_types", "{{ 1 is number }} {{ true is number }} {{ true is integer }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 's' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 's' is sequence }} {{ {} is iterable }} {{ 1 is iterable }}", {}),
    ("tests_values", "{{ 3 is divisibleby 3 }} {{ 3 is odd }} {{ 4 is even }} {{ none is none }} {{ true is true }} {{ false is false }} {{ 0 is false }} {{ 'ab' is lower }} {{ 'AB' is upper }}", {}),
    ("tests_comparison", "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is gt 1 }} {{ 1 is in [1] }} {{ none is sameas none }} {{ 1 is le 1 }} {{ 1 is ge 2 }}", {}),
    ("tests_not", "{{ 1 is not string }} {{ none is not none }} {{ x is not defined }}", {}),
    ("test_callable", "{{ range is callable }} {{ 1 is callable }}", {}),
    # filters
    ("filter_trim", "[{{ '  a b  ' | trim }}] [{{ 'xxaxx' | trim('x') }}] [{{ ' \u3000a\n' | trim }}]", {}),
    ("filter_case", "{{ 'aBc' | upper }} {{ 'aBc' | lower }} {{ 'hello world' | title }} {{ 'hELLO' | capitalize }}", {}),
    ("filter_length_count", "{{ [1, 2] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }}", {}),
    ("filter_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} [{{ [] | first }}]", {}),
    ("filter_join", "{{ [1, 2, 3] | join }} {{ ['a', 'b'] | join(', ') }} {{ [{'n': 'x'}, {'n': 'y'}] | join('/', attribute='n') }}", {}),
    ("filter_list", "{{ 'abc' | list }} {{ {'a': 1, 'b': 2} | list }} {{ (1, 2) | list }}", {}),
    ("filter_items", "{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", {"d": {"a": 1, "b": [2]}}),
    ("filter_dictsort", "{{ {'b': 1, 'a': 2, 'C': 0} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value') }} {{ {'b': 1, 'a': 2} | dictsort(reverse=true) }}", {}),
    ("filter_selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | list }} {{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | list }}", {"messages": MSGS}),
    ("filter_selectattr_truthy", "{{ xs | selectattr('a') | list }} {{ xs | selectattr('a', 'defined') | list }}", {"xs": [{"a": 1}, {"b": 2}, {"a": 0}]}),
    ("filter_select_reject", "{{ [1, 0, 2, none] | select | list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ ['a', 'b'] | reject('equalto', 'a') | list }}", {}),
    ("filter_map", "{{ ['a', 'b'] | map('upper') | list }} {{ messages | map(attribute='role') | join(',') }} {{ [{'a': 1}, {}] | map(attribute='a', default=0) | list }}", {"messages": MSGS}),
    ("filter_sort", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ ['b', 'A', 'c'] | sort(case_sensitive=true) }} {{ [3, 1, 2] | sort(reverse=true) }} {{ xs | sort(attribute='n') | map(attribute='n') | list }}", {"xs": [{"n": 2}, {"n": 1}]}),
    ("filter_unique_min_max_sum", "{{ [1, 2, 1, 3] | unique | list }} {{ ['a', 'A'] | unique | list }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }} {{ [1, 2, 3] | sum }} {{ [1.5, 2] | sum }}", {}),
    ("filter_reverse", "{{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }}", {}),
    ("filter_replace", "{{ 'aXbXc' | replace('X', '-') }} {{ 'aaa' | replace('a', 'b', 2) }}", {}),
    ("filter_int_float", "{{ '3' | int }} {{ 3.9 | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ ' 42 ' | int }} {{ '2.5' | int }} {{ '2.5' | float }} {{ 3 | float }} {{ 'x' | float }} {{ true | int }}", {}),
    ("filter_string_abs_round", "{{ 1 | string }} {{ true | string }} {{ [1] | string }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(method='ceil') }}", {}),
    ("filter_indent", "[{{ 'a\nb\n\nc' | indent(2) }}] [{{ 'a\nb' | indent(2, true) }}] [{{ 'a\n\nb' | indent(2, blank=true) }}] [{{ 'a\nb' | indent('> ') }}]", {}),
    ("filter_tojson", "{{ d | tojson }} {{ d | tojson(indent=2) }} {{ [] | tojson(indent=2) }} {{ {} | tojson }} {{ 'é\"\\n\x01' | tojson }} {{ 'é' | tojson(ensure_ascii=true) }} {{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }}", {"d": {"z": 1, "a": [True, None, 1.5, "s"]}}),
    ("filter_tojson_tool", "{{ tools | tojson }}\n{{ tools[0] | tojson(indent=4) }}", {"tools": [TOOL]}),
    ("filter_tojson_unicode_escape", "{{ '🦙' | tojson(ensure_ascii=true) }}", {}),
    ("filter_format", "{{ '%s and %s' | format('a', 'b') }} {{ '%(n)s' | format(n=1) }}", {}),
    ("filter_wordcount_truncate", "{{ 'a b  c' | wordcount }} {{ 'hello world foo' | truncate(9, leeway=0) }} {{ 'hello world foo' | truncate(9, true, leeway=0) }}", {}),
    ("filter_batch", "{{ [1, 2, 3] | batch(2) | list }} {{ [1, 2, 3] | batch(2, 0) | list }}", {}),
    ("filter_escape_safe", "{{ '<a href=\"x\">' | e }} {{ '<b>' | safe }}", {}),
    ("filter_chain", "{{ '  A,B ' | trim | lower | replace(',', ';') }}", {}),
    ("filter_in_if_unknown_deferred", "{% if false %}{{ x | from_json }}{% endif %}ok", {}),
    ("filter_unknown_fails", "{{ x | from_json }}", {}),
    ("filter_default_undefined_attr", "{{ m.name | default('anon') }}", {"m": {}}),
    # string methods
    ("str_strip", "[{{ '  a '.strip() }}] [{{ 'xax'.strip('x') }}] [{{ '  a '.lstrip() }}] [{{ '  a '.rstrip() }}] [{{ '\n\na\n'.lstrip('\n') }}]", {}),
    ("str_split", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a  b  '.split() }} {{ 'a b c'.split(none, 1) }}", {}),
    ("str_split_index", "{{ s.split('</think>')[-1].lstrip('\n') }}|{{ s.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}", {"s": "<think>\nreason\n</think>\n\nanswer"}),
    ("str_starts_ends", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('x') }} {{ 'hello'.startswith('l', 2) }}", {}),
    ("str_find_count", "{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'héllo'.find('l') }} {{ 'hello'.count('l') }} {{ 'hello'.index('e') }}", {}),
    ("str_index_missing_fails", "{{ 'hello'.index('z') }}", {}),
    ("str_replace_upper", "{{ 'a-b'.replace('-', '+') }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'ab cd'.title() }} {{ 'ab'.capitalize() }}", {}),
    ("str_join_format", "{{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'x') }} {{ '{0}{0}'.format('z') }} {{ '{name}!'.format(name='n') }} {{ '{:>5}|{:<4}|{:^5}|{:05d}|{:.2f}'.format('a', 'b', 'c', 42, 3.14159) }} {{ '{{x}}'.format() }} {{ '{:,}|{:_}|{:,.2f}'.format(1234567, 1000, 9876.5) }}", {}),
    ("str_predicates", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }} {{ ''.isdigit() }}", {}),
    ("str_misc", "{{ '7'.zfill(3) }} {{ 'a'.ljust(3) }}| {{ 'a'.rjust(3) }} {{ 'abc'.removeprefix('a') }} {{ 'abc'.removesuffix('c') }} {{ 'a=b'.partition('=') }} {{ 'a\nb\r\nc'.splitlines() }}", {}),
    ("list_methods", "{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }}", {}),
    ("list_append_unsafe", "{% set xs = [] %}{{ xs.append(1) }}", {}),
    ("dict_pop_unsafe", "{{ {'a': 1}.pop('a') }}", {}),
    ("str_repr_in_containers", "{{ ['it\\'s', \"q\\\"\", 'a\\nb'] }} {{ {'k': none, 'b': false} }}", {}),
    ("generators", "{% if [] | select %}always true{% endif %} {{ none | selectattr('a') | list }} {{ [3, 1] | map('string') | join }} {{ [1, 2] | reverse | list }}", {}),
    ("generator_has_no_length", "{{ [1] | select | length }}", {}),
    ("generator_not_json", "{{ [1] | map('int') | tojson }}", {}),
    ("markup_escapes_other_side", "{{ '<b>' | safe + '<i>' }} {{ 'x&' + '<y>' | safe }} {{ '<' | e | e }}", {}),
    ("markup_plus_int_fails", "{{ 'a' | safe + 1 }}", {}),
    # statements
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_cycle", "{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("for_filter", "{% for x in range(6) if x is odd %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}none{% endfor %}", {}),
    ("for_unpack", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {}),
    ("for_dict_keys", "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1, 2] %}{% for b in [1, 2] %}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("for_scope", "{% set x = 0 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}{{ x }}", {}),
    ("for_scope_per_iteration", "{% for i in [1, 2] %}{% if i == 1 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}", {}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(3, 0, -1) | list }}", {}),
    ("set_and_namespace", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}", {"messages": MSGS}),
    ("set_tuple_unpack", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("set_block", "{% set x %}  inner {{ 1 + 1 }}  {% endset %}[{{ x }}]", {}),
    ("set_block_filter", "{% set x | upper %}abc{% endset %}{{ x }}", {}),
    ("set_in_if_leaks", "{% if true %}{% set z = 3 %}{% endif %}{{ z }}", {}),
    ("namespace_repr", "{{ namespace(a=1) }}", {}),
    ("set_attr_non_namespace_fails", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}", {}),
    ("macro_scope", "{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}{% for x in [7] %}{{ m() }}{% endfor %}", {}),
    ("macro_recursion", "{% macro count(n) %}{{ n }}{% if n > 0 %}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
    ("macro_missing_argument", "{% macro m(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(1) }}", {}),
    ("call_block", "{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside{% endcall %}", {}),
    ("filter_block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("generation_tag", "{% generation %}gen{% endgeneration %}", {}),
    ("raise_exception", "{{ raise_exception('no system role') }}", {}),
    ("raise_in_branch_not_taken", "{% if false %}{{ raise_exception('x') }}{% endif %}fine", {}),
    ("strftime_now", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M') }}", {}),
    ("dict_literal_and_tojson", "{% set d = {'name': 'f', 'arguments': {'x': 1}} %}{{ d | tojson }} {{ d.arguments.x }}", {}),
    ("dict_items_tuple_repr", "{{ {'a': 1}.items() | list }}", {}),
    ("is_test_precedence", "{{ not x is defined }} {{ 1 if x is defined else 2 }}", {}),
    ("filter_precedence", "{{ -3 | abs }} {{ 'a' + 'b' | upper }} {{ [1, 2] | length > 1 }}", {}),
    ("syntax_error_unclosed", "{% if true %}x", {}),
    ("syntax_error_bad_tag", "{% frobnicate %}", {}),
    ("syntax_error_expression", "{{ 1 + }}", {}),
    # a whole chat template
    ("chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", {"messages": MSGS, "add_generation_prompt": True}),
]


def main():
    cases = []
    for name, source, variables in CASES:
        case = {"name": name, "source": source, "vars": variables}
        try:
            case["rendered"] = render(source, variables)
        except Exception as e:  # noqa: BLE001 - any jinja2 failure is a case Tandem must reject
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    names = [c["name"] for c in cases]
    if len(names) != len(set(names)):
        sys.exit("duplicate case names")
    doc = {"comment": f"Generated by tests/tools/make_jinja_vectors.py with jinja2 {jinja2.__version__}; do not edit.",
           "now": NOW, "cases": cases}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"{OUT}: {len(cases)} cases, {sum('error' in c for c in cases)} of them errors")


if __name__ == "__main__":
    main()
