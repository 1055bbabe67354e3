#!/usr/bin/env python3
"""Seeds the fuzz corpora (fuzz/corpus/<target>/) from the repository's own inputs.

Protocols come from protocols/, examples/, the YAML embedded in the tests (raw strings that
look like a protocol) and the kept regression inputs; SCXML documents from tests/fixtures/ and
the importer's tests; expressions are the guards, assignments, conditions and templates found
in all of those. Run from anywhere: `python3 fuzz/seed.py`. Existing corpus files are kept.
"""

import hashlib
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"

RAW_STRING = re.compile(r'r#"(.*?)"#', re.S)
# `guard: x < 3`, `if: tries == 0`, `delay: base * 2`, `timeout: ...` (up to a `,` or `}`
# ending a flow mapping, or the end of the line).
EXPRESSION_KEY = re.compile(r"\b(?:guard|if|delay|timeout|cond|expr)\s*[:=]\s*\"?([^\"\n,}]+)")
# Values of `assign:` mappings, and every template `${...}`.
ASSIGN = re.compile(r'assign:\s*\{([^}]*)\}')
ASSIGN_VALUE = re.compile(r':\s*"([^"]*)"')
TEMPLATE = re.compile(r'"[^"\n]*\$\{[^"\n]*"')


def write(target, text):
    data = text.encode()
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)


def files(*patterns):
    for pattern in patterns:
        yield from sorted(ROOT.glob(pattern))


def main():
    protocols = [path.read_text() for path in files(
        "protocols/*.yaml", "examples/**/*.yaml", "tests/**/*.yaml")]
    for path in files("tests/**/*.rs", "src/**/tests.rs", "benches/*.rs"):
        for text in RAW_STRING.findall(path.read_text()):
            if "states:" in text:
                protocols.append(text)
    for path in files("tests/fixtures/fuzz/yaml_loader/*", "tests/fixtures/fuzz/pipeline/*"):
        protocols.append(path.read_text(errors="replace"))
    for text in protocols:
        write("yaml_loader", text)
        write("pipeline", text)

    documents = [path.read_text() for path in files(
        "tests/fixtures/**/*.scxml", "tests/fixtures/fuzz/scxml_import/*")]
    for text in RAW_STRING.findall((ROOT / "src/tooling/import/tests.rs").read_text()):
        if "<scxml" in text:
            documents.append(text)
    for text in documents:
        write("scxml_import", text)

    expressions = set()
    for text in protocols + documents:
        expressions.update(match.strip() for match in EXPRESSION_KEY.findall(text))
        for mapping in ASSIGN.findall(text):
            expressions.update(ASSIGN_VALUE.findall(mapping))
        expressions.update(match.strip('"') for match in TEMPLATE.findall(text))
    for path in files("tests/fixtures/fuzz/expressions/*"):
        expressions.add(path.read_text(errors="replace"))
    for expression in sorted(expressions):
        if expression:
            write("expressions", expression)

    for target in ("yaml_loader", "pipeline", "scxml_import", "expressions"):
        print(f"{target}: {len(list((CORPUS / target).iterdir()))} inputs")


if __name__ == "__main__":
    main()
