"""The chat-template corpus: every template of llama.cpp's models/templates/ (the templates
of published models, fetched by `make test-data` into $TANDEM_HOME/chat-templates) renders
the same text with Tandem as with jinja2 in Hugging Face transformers' environment, for a set
of conversations (system or not, several turns, tools with a call and its result), with and
without the generation prompt. A pair where jinja2 fails must fail in Tandem too.

At least 95% of the pairs must be identical; the rest are listed (docs/chat_templates.md says
why). Tandem renders through `tandem chat-template --template-file F --batch`, the messages
going through the same conversion the server uses.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "tools"))
from make_jinja_vectors import NOW, hf_environment  # noqa: E402

HOME = Path(os.environ.get("TANDEM_HOME", Path.home() / ".cache" / "tandem"))
CORPUS = HOME / "chat-templates"
BOS, EOS = "<s>", "</s>"
REQUIRED_SHARE = 0.95

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]


def m(role, content, **extra):
    return {"role": role, "content": content, **extra}


CONVERSATIONS = {
    "user": ([m("user", "Hello!")], None),
    "system_user": ([m("system", "You are terse."), m("user", "Hi")], None),
    "multi_turn": ([m("user", "What is 2+2?"), m("assistant", "4."), m("user", "And 3+3?")], None),
    "system_multi_turn": ([m("system", "Be kind."), m("user", "Hi"), m("assistant", "Hello! How can I help?"),
                           m("user", "Tell me a joke.")], None),
    "tool_call": ([m("user", "What is the weather in Paris?"),
                   m("assistant", None, tool_calls=[{"id": "call_1", "type": "function", "function": {
                       "name": "get_weather", "arguments": {"city": "Paris"}}}]),
                   m("tool", '{"temperature": 22, "condition": "sunny"}', tool_call_id="call_1",
                     name="get_weather")], TOOLS),
    # The same with an empty content and a 9-character id (Mistral's rule), then the answer.
    "tool_call_answered": ([m("system", "Use tools when needed."), m("user", "Weather in Paris and Rome?"),
                            m("assistant", "", tool_calls=[
                                {"id": "abc123XYZ", "type": "function",
                                 "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                                {"id": "def456UVW", "type": "function",
                                 "function": {"name": "get_weather", "arguments": {"city": "Rome", "unit": "celsius"}}}]),
                            m("tool", "22C sunny", tool_call_id="abc123XYZ", name="get_weather"),
                            m("tool", "25C clear", tool_call_id="def456UVW", name="get_weather"),
                            m("assistant", "Paris: 22C, sunny. Rome: 25C, clear."),
                            m("user", "Thanks!")], TOOLS),
    # Earlier thinking in the history (templates with thinking sections render or drop it).
    "reasoning_history": ([m("user", "2+2?"), m("assistant", "4", reasoning_content="Two plus two is four."),
                           m("user", "3+3?")], None),
}


def tandem_binary():
    b = os.environ.get("TANDEM_BINARY") or str(ROOT / "build" / "bin" / "tandem")
    if not Path(b).exists():
        pytest.skip(f"no tandem binary at {b}")
    return b


def jinja2_render(template, messages, tools, gen):
    try:
        return "ok", template.render(messages=messages, tools=tools, documents=None,
                                                    add_generation_prompt=gen, bos_token=BOS, eos_token=EOS)
    except Exception as e:  # noqa: BLE001 - any failure of jinja2 is an outcome to match
        return "error", f"{type(e).__name__}: {e}"


def tandem_render(binary, path, cases):
    lines = "".join(json.dumps({"messages": msgs, "tools": tools, "add_generation_prompt": gen}) + "\n"
                    for _, msgs, tools, gen in cases)
    proc = subprocess.run([binary, "chat-template", "--template-file", str(path), "--bos", BOS, "--eos", EOS,
                           "--now", str(NOW), "--batch"], input=lines, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:  # the template did not load (a parse error): every case fails
        return [("error", proc.stderr.strip())] * len(cases)
    out = []
    for line in proc.stdout.splitlines():
        r = json.loads(line)
        out.append(("ok", r["rendered"]) if "rendered" in r else ("error", r["error"]))
    assert len(out) == len(cases), proc.stderr
    return out


def first_difference(a, b):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return i, a[max(0, i - 30):i + 50], b[max(0, i - 30):i + 50]


def test_corpus_matches_jinja2():
    templates = sorted(CORPUS.glob("*.jinja"))
    if not templates:
        pytest.skip(f"no chat templates in {CORPUS}: run `make test-data` (scripts/fetch-chat-templates.sh)")
    binary = tandem_binary()
    env = hf_environment()
    total, same, both_rejected, diffs = 0, 0, 0, []
    for path in templates:
        try:
            template = env.from_string(path.read_text())
        except Exception as e:  # noqa: BLE001 - a template jinja2 cannot compile fails every case
            template = e
        cases = [(name, msgs, tools, gen) for name, (msgs, tools) in CONVERSATIONS.items() for gen in (False, True)]
        got = tandem_render(binary, path, cases)
        for (name, msgs, tools, gen), (kind, text) in zip(cases, got):
            if isinstance(template, Exception):
                want_kind, want_text = "error", f"{type(template).__name__}: {template}"
            else:
                want_kind, want_text = jinja2_render(template, msgs, tools, gen)
            total += 1
            if kind == want_kind and (kind == "error" or text == want_text):
                same += 1
                both_rejected += kind == "error"
                continue
            if kind != want_kind:
                detail = f"jinja2 {want_kind}: {want_text[:120]!r}; tandem {kind}: {text[:120]!r}"
            else:
                at, w, g = first_difference(want_text, text)
                detail = f"differ at {at}: jinja2 {w!r} tandem {g!r}"
            diffs.append(f"{path.name} [{name}, generation prompt {'on' if gen else 'off'}]: {detail}")
    share = same / total
    print(f"\nchat-template corpus: {same}/{total} (template, conversation) pairs identical "
          f"({100 * share:.1f}%; {both_rejected} of them rejected by both), {len(templates)} templates")
    for d in diffs:
        print("  differs:", d)
    assert share >= REQUIRED_SHARE, f"only {same}/{total} identical"
