#!/usr/bin/env python3
"""Where two builds' instructions differ, by source file: each file's
instructions per request in profile A and in profile B, largest
difference first. Inlined code counts in the file it was written in, so
two builds that inline differently still compare file for file (a
function's name does not: what one build inlines, the other calls).

    python3 bench/code-by-file.py [--top K] A_PROFILE A_REQUESTS B_PROFILE B_REQUESTS

The profiles are callgrind's (bench/gateway-callgrind.sh prints where it
left each and how many requests it counted). Reads them with
callgrind_annotate (valgrind's); writes nothing.
"""

import argparse
import collections
import re
import subprocess
import sys

# "  1,234 (12.34%)  ...  /path/to/file.rs:function [object]", the first
# count being the instructions (callgrind's first event).
ROW = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s.*?\s(\S+?):(\S.*)$")


def short(path):
    """A file's path without the machine's prefixes: the crate and its
    version for a dependency, `std:` for the standard library."""
    path = re.sub(r".*/registry/src/[^/]+/", "", path)
    path = re.sub(r"/rustc/[0-9a-f]+/library/", "std:", path)
    return path


def per_file(profile, requests):
    """Instructions per request by source file, from `profile`."""
    try:
        annotated = subprocess.run(
            ["callgrind_annotate", "--auto=no", "--threshold=100", profile],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except FileNotFoundError:
        sys.exit("callgrind_annotate not found: apt-get install -y valgrind")
    except subprocess.CalledProcessError as e:
        sys.exit(f"{profile}: callgrind_annotate failed: {e.stderr.strip()}")
    totals = collections.Counter()
    for line in annotated.splitlines():
        row = ROW.match(line)
        if row:
            totals[short(row.group(2))] += int(row.group(1).replace(",", "")) / requests
    if not totals:
        sys.exit(f"{profile}: no instruction counts by file (a callgrind profile?)")
    return totals


def requests_count(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: requests must be a whole number of at least 1")
    return n


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=requests_count, default=30, help="rows shown (30)")
    parser.add_argument("a_profile")
    parser.add_argument("a_requests", type=requests_count)
    parser.add_argument("b_profile")
    parser.add_argument("b_requests", type=requests_count)
    args = parser.parse_args()
    a = per_file(args.a_profile, args.a_requests)
    b = per_file(args.b_profile, args.b_requests)
    files = sorted(set(a) | set(b), key=lambda f: (-(a[f] - b[f]), f))
    print(f"{'A':>8} {'B':>8} {'A - B':>8}  source file (instructions a request)")
    for f in files[: args.top]:
        print(f"{a[f]:8.0f} {b[f]:8.0f} {a[f] - b[f]:8.0f}  {f}")
    print(f"{sum(a.values()):8.0f} {sum(b.values()):8.0f} {sum(a.values()) - sum(b.values()):8.0f}  all")


if __name__ == "__main__":
    main()
