#!/usr/bin/env python3
"""Extracts the shell commands the docs show, for scripts/test-docs.sh.

Every fenced ```sh block of the given Markdown files is either run or explained:
  ```sh doctest           run by the doc tests, in page order, one shell per page
  <!-- no-doctest: WHY -->
  ```sh                   not run; WHY (in the page source, just above) says why
An sh block that is neither fails, and so does a relative link to a page or file that
does not exist. Writes OUT/NN-page.sh per page that has doctest blocks and prints
their paths.

usage: doctest.py OUT FILE.md...
"""
import os
import re
import sys

FENCE = re.compile(r"^(\s*)(```+)\s*(\S*)\s*(.*)$")
NO_DOCTEST = re.compile(r"^\s*<!--\s*no-doctest:\s*(.{10,}?)\s*-->\s*$")
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def blocks(path):
    """Yields (line, info, text, preceding line) for each fenced block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang, rest = m.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line)
            i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        yield start + 1, lang, rest.split(), "\n".join(body), prev
        i += 1


def bad_links(path):
    base = os.path.dirname(path)
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in LINK.finditer(text):
        target = m.group(1)
        if "://" in target or target.startswith("mailto:"):
            continue
        if not os.path.exists(os.path.join(base, target)):
            yield target


def main():
    out, files = sys.argv[1], sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    errors = []
    n = 0
    for path in files:
        for target in bad_links(path):
            errors.append(f"{path}: link to {target}, which does not exist")
        script = []
        for line, lang, attrs, body, prev in blocks(path):
            if lang != "sh":
                continue
            if "doctest" in attrs:
                script.append(f"echo '--- {path}:{line}'\n{body}\n")
            elif not NO_DOCTEST.match(prev):
                errors.append(
                    f"{path}:{line}: an sh block is neither ```sh doctest nor preceded "
                    "by <!-- no-doctest: WHY IT CANNOT RUN IN CI -->"
                )
        if script:
            n += 1
            name = os.path.join(out, f"{n:02d}-{os.path.basename(path)[:-3]}.sh")
            with open(name, "w", encoding="utf-8") as f:
                f.write(f"# The doctest blocks of {path}, in order.\n")
                f.write("set -euo pipefail\n" + "\n".join(script))
            print(name)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
