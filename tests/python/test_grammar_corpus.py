"""The grammar corpus: random tokens of the default model's vocabulary, drawn under the mask
of each schema in tests/data/schemas/, must make JSON that validates against that schema.

tests/tools/grammar_corpus_sampler.cpp does the drawing (and checks the mask against the
matcher at every step); this file checks every output with Python's jsonschema, format
assertions on (date, time, date-time, uuid, email, ipv4).
"""
import json
import os
import pathlib
import subprocess

import jsonschema
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "tests" / "data" / "schemas").glob("*.json"))
MODEL = pathlib.Path(os.environ.get("TANDEM_HOME", pathlib.Path.home() / ".cache" / "tandem")) / "models" / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
SEEDS = (1, 2)


def run_sampler(seed):
    sampler = os.environ.get("TANDEM_GRAMMAR_SAMPLER", str(ROOT / "build" / "bin" / "grammar_corpus_sampler"))
    if not MODEL.exists():
        pytest.fail(f"{MODEL} is missing: run `make model` first")
    proc = subprocess.run([sampler, str(MODEL), str(seed)] + [str(s) for s in SCHEMAS],
                          capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == len(SCHEMAS), proc.stderr
    return lines


def test_corpus_is_large_enough():
    assert len(SCHEMAS) >= 200


@pytest.mark.parametrize("seed", SEEDS)
def test_every_output_validates(seed):
    failures = []
    tokens = 0
    for line in run_sampler(seed):
        schema_path = pathlib.Path(line["schema"])
        if "error" in line:
            failures.append(f"{schema_path.name}: {line['error']}")
            continue
        schema = json.loads(schema_path.read_text())
        try:
            value = json.loads(line["output"])
        except json.JSONDecodeError as e:
            failures.append(f"{schema_path.name}: output is not JSON ({e}): {line['output']!r}")
            continue
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        errors = list(validator.iter_errors(value))
        if errors:
            failures.append(f"{schema_path.name}: {errors[0].message}: {line['output']!r}")
        tokens += line["tokens"]
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} of {len(SCHEMAS)} failed)"
    print(f"seed {seed}: {len(SCHEMAS)} schemas, {tokens} tokens")
