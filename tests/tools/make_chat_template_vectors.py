#!/usr/bin/env python3
"""Writes the chat-template reference vectors under tests/data/chat_template/: message lists
rendered with jinja2 the way Hugging Face transformers renders chat templates
(trim_blocks, lstrip_blocks, raise_exception), from

  smollm2.json   the default model's own tokenizer.chat_template (read from its GGUF file)
  llama3.json, llama2.json, mistral.json, zephyr.json
                 the published templates of Llama-3-Instruct, Llama-2-chat,
                 Mistral-7B-Instruct-v0.1 and zephyr-7b-beta (their text is below)

    pip install jinja2 gguf   (see tests/requirements.txt)
    make model
    python3 tests/tools/make_chat_template_vectors.py
"""
import json
import os
import pathlib
import sys

import gguf
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "tests" / "data" / "chat_template"
HOME = pathlib.Path(os.environ.get("TANDEM_HOME", pathlib.Path.home() / ".cache" / "tandem"))
DEFAULT_MODEL = HOME / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

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


def main():
    if not DEFAULT_MODEL.exists():
        sys.exit(f"{DEFAULT_MODEL} is missing: run `make model`")
    reader = gguf.GGUFReader(str(DEFAULT_MODEL))
    write("smollm2", field_string(reader, "tokenizer.chat_template"),
          token_text(reader, "tokenizer.ggml.bos_token_id"), token_text(reader, "tokenizer.ggml.eos_token_id"))
    for name, t in PUBLISHED.items():
        write(name, t["source"], t["bos"], t["eos"])


if __name__ == "__main__":
    main()
