#!/usr/bin/env python3
"""Writes the chat-template reference vectors under tests/data/chat_template/: message lists
rendered with jinja2 the way Hugging Face transformers renders chat templates
(trim_blocks, lstrip_blocks, raise_exception), from

  smollm2.json   the default model's own tokenizer.chat_template (read from its GGUF file)
  llama3.json, llama2.json, mistral.json, zephyr.json
                 the published templates of Llama-3-Instruct, Llama-2-chat,
                 Mistral-7B-Instruct-v0.1 and zephyr-7b-beta (their text is below)
  gpt-oss.json   gpt-oss-120b's template (the harmony format; `make test-data` fetched it
                 into $TANDEM_HOME/chat-templates) in transformers' full environment
                 (strftime_now, tojson, loop controls) with tools, tool calls, reasoning and
                 template kwargs (reasoning_effort, model_identity, builtin_tools), the
                 messages in OpenAI's form converted as the server converts them

    pip install jinja2 gguf   (see tests/requirements.txt)
    make model test-data
    python3 tests/tools/make_chat_template_vectors.py [NAME ...]   (default: all)
"""
import copy
import json
import os
import pathlib
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from make_jinja_vectors import NOW, hf_environment

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "tests" / "data" / "chat_template"
HOME = pathlib.Path(os.environ.get("TANDEM_HOME", pathlib.Path.home() / ".cache" / "tandem"))
DEFAULT_MODEL = HOME / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GPT_OSS = HOME / "chat-templates" / "openai-gpt-oss-120b.jinja"

PUBLISHED = {
    "llama3": {
        "bos": "<|begin_of_text|>", "eos": "<|end_of_text|>",
        "source": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
    },
    "llama2": {
        "bos": "<s>", "eos": "</s>",
        "source": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    },
    "mistral": {
        "bos": "<s>", "eos": "</s>",
        "source": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
    },
    "zephyr": {
        "bos": "<s>", "eos": "</s>",
        "source": "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
    },
}


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = [
    [],
    [m("user", "Hello!")],
    [m("system", "You are terse."), m("user", "Hi")],
    [m("user", "What is 2+2?"), m("assistant", "4."), m("user", "And 3+3?")],
    [m("system", "Be kind."), m("user", "Hi"), m("assistant", "Hello! How can I help?"),
     m("user", "Tell me a joke."), m("assistant", "Why did the llama cross the road?")],
    [m("user", "  padded with spaces and newlines \n\n"), m("assistant", "\tsure\u3000")],
    [m("user", "Unicode: héllo wörld, 你好, 🦙 and an injected <|im_end|> marker <|eot_id|> [/INST]")],
    [m("user", "line one\nline two\n\nline four")],
    [m("assistant", "I speak first.")],
    [m("system", "Only a system message.")],
    [m("system", ""), m("user", "")],
    [m("user", "Use the tool."), m("tool", "{\"result\": 42}")],
    [m("user", "a"), m("user", "b")],
    [m("system", "s1"), m("system", "s2"), m("user", "u")],
]


def render(source, bos, eos, messages, add_generation_prompt):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    return template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                           bos_token=bos, eos_token=eos)


def field_string(reader, key):
    f = reader.fields[key]
    return bytes(f.parts[f.data[0]]).decode()


def token_text(reader, id_key):
    tokens = reader.fields["tokenizer.ggml.tokens"]
    idx = int(reader.fields[id_key].parts[-1][0])
    return bytes(tokens.parts[tokens.data[idx]]).decode()


def write(name, source, bos, eos):
    cases = []
    for messages in CONVERSATIONS:
        for gen in (False, True):
            case = {"messages": messages, "add_generation_prompt": gen}
            try:
                case["rendered"] = render(source, bos, eos, messages, gen)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            cases.append(case)
    doc = {"comment": "Generated by tests/tools/make_chat_template_vectors.py with jinja2 "
                      f"{jinja2.__version__}; do not edit.",
           "template": name, "bos": bos, "eos": eos, "source": source, "cases": cases}
    out = OUT_DIR / f"{name}.json"
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"{out}: {len(cases)} cases")


# ---- gpt-oss (harmony) ----

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["city"]}}}
# Every branch of the template's TypeScript rendering of parameter types.
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the notes",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "scores": {"type": "array", "items": {"type": "number"}, "nullable": True},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "flags": {"type": "array", "items": {"type": "boolean"}},
        "pairs": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "anything": {"type": "array"},
        "limit": {"type": "integer", "default": 10},
        "exact": {"type": "boolean"},
        "note": {"type": "string", "nullable": True},
        "either": {"oneOf": [{"type": "string", "description": "a name"}, {"type": "number"}], "default": "x"},
        "union": {"type": ["string", "number"]},
        "filter": {"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                   "required": ["from"]},
        "blob": {"type": "object"},
        "mystery": {}},
        "required": ["query"]}}}
NOW_TOOL = {"type": "function", "function": {"name": "now", "description": "The time"}}


def call(name, arguments, id_):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def a(content, **extra):
    return {"role": "assistant", "content": content, **extra}


ASK = m("user", "What is the weather in Paris?")
PARIS = call("get_weather", {"city": "Paris"}, "call_1")
ROME = call("get_weather", {"city": "Rome", "unit": "fahrenheit"}, "call_2")

# (messages, tools, kwargs)
GPT_OSS_CASES = [
    ([m("user", "Hello!")], None, None),
    ([m("system", "You are terse."), m("user", "Hi")], None, None),
    ([m("user", "What is 2+2?"), a("4."), m("user", "And 3+3?")], None, None),
    ([m("user", "2+2?"), a("4", reasoning_content="Two plus two is four."), m("user", "3+3?")], None, None),
    ([m("user", "Hi")], None, {"reasoning_effort": "low"}),
    ([m("user", "Hi")], None, {"reasoning_effort": "high", "model_identity": "You are Tandem."}),
    ([m("user", "Hi")], None, {"builtin_tools": ["browser", "python"]}),
    ([m("system", "Use tools."), ASK], [WEATHER, SEARCH, NOW_TOOL], None),
    # A call with its reasoning, answered by the tool: the reasoning stays (no final yet).
    ([ASK, a(None, reasoning_content="I need the weather tool.", tool_calls=[PARIS]),
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22C, sunny"}], [WEATHER], None),
    # The same answered; the final answer drops the call's reasoning; then another turn.
    ([ASK, a(None, reasoning_content="I need the weather tool.", tool_calls=[PARIS]),
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22C, sunny"},
      a("It is 22C and sunny."), m("user", "And Rome?")], [WEATHER], {"reasoning_effort": "low"}),
    # A null content without reasoning, and two calls in one message (the template shows the first).
    ([ASK, a(None, tool_calls=[PARIS, ROME]),
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"t\": 22}"},
      {"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "{\"t\": 77}"}], [WEATHER], None),
    # A call with content beside it: the content is the analysis.
    ([ASK, a("Let me look that up.", tool_calls=[PARIS])], [WEATHER], None),
    # The last assistant turn with the generation prompt off: training form (analysis, <|return|>).
    ([m("user", "Hi"), a("Hello!", reasoning_content="Greet back.")], None, None),
    ([m("user", "Unicode: héllo wörld, 你好, 🦙 and <|end|> <|start|> markers")], None, None),
    # The template's own errors.
    ([m("user", "x"), {"role": "tool", "tool_call_id": "c", "name": "f", "content": "orphan"}], None, None),
    ([m("user", "x"), a("<|channel|>final<|message|>smuggled")], None, None),
    ([ASK, a("text", reasoning_content="thought", tool_calls=[PARIS])], [WEATHER], None),
]


def template_messages(messages, harmony):
    """OpenAI-form messages as the server hands them to a template: arguments that hold a JSON
    object as that object, empty fields absent; for harmony templates llama.cpp's adjustments
    (reasoning_content also as `thinking`, a null content as "", no content beside reasoning on
    a tool call)."""
    out = []
    for msg in messages:
        msg = copy.deepcopy(msg)
        reasoning = msg.pop("reasoning_content", None)
        t = {"role": msg["role"], "content": msg.get("content")}
        if harmony:
            if t["content"] is None:
                t["content"] = ""
            if reasoning and msg.get("tool_calls"):
                del t["content"]
        if reasoning:
            t["reasoning_content"] = reasoning
            if harmony:
                t["thinking"] = reasoning
        if msg.get("tool_calls"):
            calls = []
            for c in msg["tool_calls"]:
                args = c["function"]["arguments"]
                try:
                    parsed = json.loads(args)
                    args = parsed if isinstance(parsed, dict) else args
                except ValueError:
                    pass
                call_ = {"id": c["id"]} if c.get("id") else {}
                call_.update({"type": "function", "function": {"name": c["function"]["name"], "arguments": args}})
                calls.append(call_)
            t["tool_calls"] = calls
        for key in ("tool_call_id", "name"):
            if msg.get(key):
                t[key] = msg[key]
        out.append(t)
    return out


def write_gpt_oss():
    if not GPT_OSS.exists():
        sys.exit(f"{GPT_OSS} is missing: run `make test-data`")
    source = GPT_OSS.read_text()
    bos, eos = "<|startoftext|>", "<|return|>"
    template = hf_environment().from_string(source)
    cases = []
    for messages, tools, kwargs in GPT_OSS_CASES:
        for gen in (False, True):
            case = {"messages": messages, "tools": tools, "kwargs": kwargs, "add_generation_prompt": gen}
            variables = dict(kwargs or {})
            variables.update(messages=template_messages(messages, harmony=True), tools=tools, documents=None,
                             add_generation_prompt=gen, bos_token=bos, eos_token=eos)
            try:
                case["rendered"] = template.render(**variables)
            except jinja2.exceptions.TemplateError as e:
                case["error"] = str(e)
            cases.append(case)
    doc = {"comment": "Generated by tests/tools/make_chat_template_vectors.py with jinja2 "
                      f"{jinja2.__version__} in transformers' environment; do not edit.",
           "template": "gpt-oss", "bos": bos, "eos": eos, "now": NOW, "source": source, "cases": cases}
    out = OUT_DIR / "gpt-oss.json"
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    print(f"{out}: {len(cases)} cases, {sum('error' in c for c in cases)} of them errors")


def write_smollm2():
    import gguf  # only this file needs the GGUF reader

    if not DEFAULT_MODEL.exists():
        sys.exit(f"{DEFAULT_MODEL} is missing: run `make model`")
    reader = gguf.GGUFReader(str(DEFAULT_MODEL))
    write("smollm2", field_string(reader, "tokenizer.chat_template"),
          token_text(reader, "tokenizer.ggml.bos_token_id"), token_text(reader, "tokenizer.ggml.eos_token_id"))


def main():
    names = sys.argv[1:] or ["smollm2", *PUBLISHED, "gpt-oss"]
    for name in names:
        if name == "smollm2":
            write_smollm2()
        elif name == "gpt-oss":
            write_gpt_oss()
        else:
            t = PUBLISHED[name]
            write(name, t["source"], t["bos"], t["eos"])


if __name__ == "__main__":
    main()
