#!/usr/bin/env python3
"""Checks that the measured figures README.md and docs/*.md quote agree with
BENCHMARKS.md's tables, so that a benchmark re-run that changes a table shows
every sentence still quoting the old number.

Rules, outside code blocks (a block is a command's output, reproducible by
running the command shown with it):

1. A paragraph, list item or table row that cites BENCHMARKS.md is a
   quotation: every figure in it (a time in ns/us/ms/s, a size in
   KiB/MiB/GiB, a ratio like 2.3x) must be a figure of a BENCHMARKS.md table,
   rounded as written ("2.4 ms" matches 2.41 ms, "0.86 s" matches 855 ms),
   in the section the citation names (BENCHMARKS.md#simulate: the tables
   under that heading); a quotation must name its section.
2. A speed claim ("5x faster") or a cost per pick in nanoseconds must be such
   a quotation: it cites BENCHMARKS.md.

Prints one line per problem and exits 1 if there is any; run from anywhere
(`python3 scripts/check_figures.py`). Standard library only.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (number, unit) -> factor to the base unit of its kind.
UNITS = {
    "ns": ("time", 1.0),
    "µs": ("time", 1e3),
    "us": ("time", 1e3),
    "ms": ("time", 1e6),
    "s": ("time", 1e9),
    "KiB": ("size", 1024.0),
    "MiB": ("size", 1024.0**2),
    "GiB": ("size", 1024.0**3),
    "x": ("ratio", 1.0),
    "×": ("ratio", 1.0),
}
# A number (not an exponent like 2^64, not part of a word or version), then a unit.
FIGURE = re.compile(
    r"(?<![\w^.])(\d+(?:,\d{3})*(?:\.\d+)?)\s?(ns|µs|us|ms|s|KiB|MiB|GiB|x|×)(?![\w/])"
)
CITES = re.compile(r"BENCHMARKS\.md(?:#([\w-]+))?")
SPEED_CLAIM = re.compile(
    r"(?<![\d.])\d+(?:\.\d+)?\s?(?:(?:x|×|times) faster|ns (?:a|per) pick)"
)


def figures(text):
    """(kind, value in the base unit, decimals written, as written) of each figure."""
    out = []
    for m in FIGURE.finditer(text):
        number, unit = m.group(1).replace(",", ""), m.group(2)
        kind, factor = UNITS[unit]
        decimals = len(number.split(".")[1]) if "." in number else 0
        out.append((kind, float(number) * factor, decimals, factor, m.group(0)))
    return out


def slug(heading):
    """GitHub's anchor for a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def benchmark_tables(path):
    """Section slug -> figures of the table rows under that heading (its
    subsections included)."""
    sections = {}
    stack = []  # (level, slug) of the headings above the current line
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, slug(line.lstrip("#"))))
            sections.setdefault(stack[-1][1], [])
        elif line.startswith("|"):
            found = [(k, v) for k, v, _, _, _ in figures(line)]
            for _, section in stack:
                sections[section].extend(found)
    return sections


def blocks(path):
    """(first line number, text) of each paragraph, list item and table row
    outside code blocks."""
    out = []
    current, start = [], 0
    in_code = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            if current:
                out.append((start, " ".join(current)))
                current = []
            continue
        if in_code:
            continue
        new_block = (
            not line.strip()
            or line.startswith("|")
            or line.startswith("#")
            or re.match(r"\s*(?:[-*]|\d+\.)\s", line)
        )
        if new_block and current:
            out.append((start, " ".join(current)))
            current = []
        if line.strip():
            if not current:
                start = n
            current.append(line.strip())
            if line.startswith("|") or line.startswith("#"):
                out.append((start, " ".join(current)))
                current = []
    if current:
        out.append((start, " ".join(current)))
    return out


def matches(figure, table):
    kind, value, decimals, factor, _ = figure
    # Half a unit of the last digit written, in the base unit, plus float slack.
    tolerance = 0.5 * 10.0**-decimals * factor * (1 + 1e-9)
    return any(k == kind and abs(v - value) <= tolerance for k, v in table)


def check(root):
    tables = benchmark_tables(root / "BENCHMARKS.md")
    docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    problems = []
    for doc in docs:
        name = doc.relative_to(root)
        for line, text in blocks(doc):
            cites = list(CITES.finditer(text))
            if not cites:
                claim = SPEED_CLAIM.search(text)
                if claim:
                    problems.append(
                        f"{name}:{line}: `{claim.group(0)}` cites no measurement: "
                        "quote BENCHMARKS.md's tables and cite it"
                    )
                continue
            anchors = [c.group(1) for c in cites if c.group(1)]
            found = figures(text)
            if found and not anchors:
                problems.append(
                    f"{name}:{line}: quotes {', '.join(f[4] for f in found)} citing "
                    "BENCHMARKS.md without a section: cite BENCHMARKS.md#SECTION"
                )
                continue
            for anchor in anchors:
                if anchor not in tables:
                    problems.append(f"{name}:{line}: BENCHMARKS.md#{anchor}: no such section")
            table = [f for a in anchors for f in tables.get(a, [])]
            for figure in found:
                if not matches(figure, table):
                    problems.append(
                        f"{name}:{line}: `{figure[4]}` is in no table of "
                        f"BENCHMARKS.md#{', #'.join(anchors)}"
                    )
    return problems


def main():
    problems = check(ROOT)
    for p in problems:
        print(p)
    if problems:
        print(f"check_figures: {len(problems)} figure(s) disagree with BENCHMARKS.md")
        return 1
    print("check_figures: every quoted figure is in BENCHMARKS.md's tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
