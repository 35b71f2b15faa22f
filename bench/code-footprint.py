#!/usr/bin/env python3
"""The code a request runs through, from callgrind profiles taken with
--dump-instr=yes: the distinct instructions executed at least HALF times
per request (0.5 by default: on most requests), and the 64-byte lines of
code they lie in. A request's misses of the instruction cache follow the
lines, not the instruction count: an instruction run twice costs one fetch,
and a line holding one hot instruction costs as much as a full one.

    python3 bench/code-footprint.py --requests N [--half H] [--top K] PROFILE...

bench/gateway-callgrind.sh runs it with CG_FOOTPRINT=1. Prints the lines
(and KiB) a request touches, the hot instructions per line, then the
functions and the crates (by the function's path, inlined code counted
where it was inlined) with the most lines. Reads only the profiles.
"""

import argparse
import collections
import re
import sys


def parse(path, counts, function_of):
    """Adds each instruction's executed count of the profile at `path` to
    `counts` (address -> count), and its function to `function_of`."""
    names = {}

    def name(text):
        # Compressed names: "(id) name" defines an id, "(id)" reuses it.
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), text)

    # Read off the profile's header; a cost line before it cannot be read.
    positions = None
    function = "?"
    address = 0
    after_calls = False
    with open(path, encoding="utf-8", errors="replace") as profile:
        for line in profile:
            line = line.rstrip("\n")
            if line.startswith("positions:"):
                positions = line.split()[1:]
                if positions[0] != "instr":
                    sys.exit(f"{path}: no instruction addresses: profile with --dump-instr=yes")
                continue
            if line.startswith("fn="):
                function = name(line[3:])
                continue
            if line.startswith("cfn="):
                name(line[4:])
                continue
            if line.startswith("calls="):
                # The next cost line is the call's inclusive cost, not the
                # call instruction's own.
                after_calls = True
                continue
            if not line or line[0] not in "0123456789+-*":
                continue
            if positions is None:
                sys.exit(f"{path}: a cost line before the profile's positions: not a callgrind profile")
            fields = line.split()
            spot = fields[0]
            if spot.startswith("0x"):
                address = int(spot, 16)
            elif spot[0] in "+-":
                step = int(spot[1:], 16) if spot[1:].startswith("0x") else int(spot[1:])
                address += step if spot[0] == "+" else -step
            elif spot != "*":
                address = int(spot)
            if after_calls:
                after_calls = False
                continue
            if len(fields) > len(positions):
                counts[address] += int(fields[len(positions)])
                function_of[address] = function


def crate_of(function):
    m = re.match(r"[<&]*(?:dyn )?([A-Za-z_][A-Za-z0-9_]*)", function)
    crate = m.group(1) if m else function
    if crate.startswith(("mi_", "_mi")):
        return "mimalloc"
    if crate.startswith("__") or crate.startswith("0x"):
        return "(libc and unnamed)"
    return crate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, required=True, help="requests the profiles counted")
    parser.add_argument("--half", type=float, default=0.5, help="executions per request that make an instruction hot")
    parser.add_argument("--top", type=int, default=15, help="functions and crates listed")
    parser.add_argument("profiles", nargs="+")
    args = parser.parse_args()
    if args.requests < 1 or not args.half > 0:
        sys.exit("--requests must be at least 1 and --half above 0")
    counts = collections.Counter()
    function_of = {}
    for path in args.profiles:
        parse(path, counts, function_of)
    floor = args.half * args.requests
    hot = [a for a, n in counts.items() if n >= floor]
    if not hot:
        sys.exit("no instruction ran that often: check --requests")
    lines = {a // 64 for a in hot}
    print(
        f"a request's code: {len(hot)} hot instructions in {len(lines)} lines of 64 bytes "
        f"({len(lines) * 64 / 1024:.1f} KiB), {len(hot) / len(lines):.1f} a line "
        f"(hot: run at least {args.half:g} times a request)"
    )
    for title, key in (("function", lambda a: function_of[a]), ("crate", lambda a: crate_of(function_of[a]))):
        instructions = collections.Counter()
        spans = collections.defaultdict(set)
        for a in hot:
            instructions[key(a)] += 1
            spans[key(a)].add(a // 64)
        print(f"\n{'lines':>6} {'instrs':>7}  {title}")
        for k in sorted(spans, key=lambda k: -len(spans[k]))[: args.top]:
            print(f"{len(spans[k]):6} {instructions[k]:7}  {k[:140]}")


if __name__ == "__main__":
    main()
