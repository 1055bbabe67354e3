#!/usr/bin/env python3
"""Instructions per phase from a callgrind profile: the inclusive count of named functions.

    valgrind --tool=callgrind --callgrind-out-file=OUT ./target/release/protocol-run validate X
    python3 benches/callgrind_phases.py OUT 'parse_checked' 'yaml::parse' ...
    python3 benches/callgrind_phases.py OUT --top 40          # self instructions by function
    python3 benches/callgrind_phases.py OUT --callers PATTERN [N]   # who calls it, and how much
    python3 benches/callgrind_phases.py OUT --callees PATTERN [N]   # what it calls, and how much
    python3 benches/callgrind_phases.py OUT --lines FILE_PATTERN [N] # source lines, calls included
    python3 benches/callgrind_phases.py OUT --by-source FILE_PATTERN [N] # own instructions by the
                                              # source function written, inlined code included
    python3 benches/callgrind_phases.py OUT --inlined BINARY FUNCTION_PATTERN DIVISOR [N]
        # needs `valgrind --dump-instr=yes`: the own instructions of the functions the pattern
        # matches, each given to the innermost function of this project's `src/` it was inlined
        # into (addr2line's inline chain), so standard-library code counts for its caller; per
        # DIVISOR (e.g. the number of calls)

Each pattern is a regular expression searched in the function names; a pattern that matches
several functions prints each of them. Counts are by function whatever file the inlined code
came from (callgrind_annotate splits those by file), and inclusive: a function's own
instructions plus those of every call it makes to another function. A function that calls
itself back through another counts that work twice, as callgrind_annotate does.
"""

import os
import re
import subprocess
import sys
from collections import defaultdict


def read(path):
    """Self instructions and call costs by function name."""
    names = {"fn": {}, "fl": {}, "ob": {}}
    own = defaultdict(int)
    calls = defaultdict(int)
    # By source line (the inlined code's own file and line), its instructions and its calls'.
    lines = defaultdict(int)
    lines_own = defaultdict(int)
    current = callee = None
    pending_call = False
    file_name = None
    line_number = 0

    def name_of(kind, text):
        match = re.match(r"\((\d+)\)(?: (.*))?", text)
        if not match:
            return text
        number, name = match.groups()
        table = names[kind]
        if name is not None:
            table[number] = name
        return table.get(number, number)

    with open(path, errors="replace") as file:
        for line in file:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            if line.startswith("fn="):
                current = name_of("fn", line[3:])
            elif line.startswith("cfn="):
                callee = name_of("fn", line[4:])
            elif line.startswith(("fl=", "fi=", "fe=")):
                file_name = name_of("fl", line.split("=", 1)[1])
            elif line.startswith(("cfl=", "cfi=")):
                name_of("fl", line.split("=", 1)[1])
            elif line.startswith(("ob=", "cob=")):
                name_of("ob", line.split("=", 1)[1])
            elif line.startswith("calls="):
                pending_call = True
            elif line[0].isdigit() or line[0] in "+-*":
                fields = line.split()
                cost = int(fields[1]) if len(fields) > 1 else 0
                # A call's target position does not move the current line; cost lines do.
                position = fields[0]
                if position[0] in "+-":
                    line_number += int(position)
                elif position != "*":
                    line_number = int(position)
                if not pending_call or callee != current:
                    lines[(file_name, line_number)] += cost
                if not pending_call:
                    lines_own[(file_name, line_number)] += cost
                if pending_call:
                    if callee != current:
                        calls[(current, callee)] += cost
                    pending_call = False
                elif current is not None:
                    own[current] += cost
    inclusive = defaultdict(int, own)
    for (caller, _), cost in calls.items():
        inclusive[caller] += cost
    return own, inclusive, calls, lines, lines_own


def by_address(path, binary_part, function_pattern):
    """Own instructions by address, of the functions that match, in objects that match."""
    names = {"fn": {}, "fl": {}, "ob": {}}
    cost = defaultdict(int)
    current = obj = None
    address = 0
    pending_call = False

    def name_of(kind, text):
        match = re.match(r"\((\d+)\)(?: (.*))?", text)
        if not match:
            return text
        number, name = match.groups()
        if name is not None:
            names[kind][number] = name
        return names[kind].get(number, number)

    def moved(previous, token):
        if token == "*":
            return previous
        if token[0] in "+-":
            return previous + int(token, 0)
        return int(token, 0)

    with open(path, errors="replace") as file:
        for line in file:
            line = line.rstrip("\n")
            if not line or line[0] == "#":
                continue
            key, _, value = line.partition("=")
            if key in ("fn", "cfn"):
                name = name_of("fn", value)
                if key == "fn":
                    current = name
            elif key in ("ob", "cob"):
                name = name_of("ob", value)
                if key == "ob":
                    obj = name
            elif key in ("fl", "fi", "fe", "cfl", "cfi"):
                name_of("fl", value)
            elif key == "calls":
                pending_call = True
            elif line[0].isdigit() or line[0] in "+-*":
                fields = line.split()
                address = moved(address, fields[0])
                if pending_call:
                    pending_call = False
                elif obj and binary_part in obj and re.search(function_pattern, current or ""):
                    cost[address] += int(fields[2]) if len(fields) > 2 else 0
    return cost


def inlined_into(binary, addresses):
    """For each address, its frames from the innermost out, as (function name, file, line);
    addr2line names the outermost symbol first, so each frame's location is paired with it."""
    output = subprocess.run(
        ["addr2line", "-a", "-i", "-f", "-C", "-e", binary] + [hex(a) for a in addresses],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    chains, current, lines = {}, None, []
    for line in output + ["0x0"]:
        if re.fullmatch(r"0x[0-9a-f]+", line):
            if current is not None:
                frames = []
                for index in range(0, len(lines) - 1, 2):
                    match = re.match(r"(.*):(\d+)", lines[index + 1].split(" ")[0])
                    if match:
                        frames.append((lines[index], match.group(1), int(match.group(2))))
                chains[current] = frames
            current, lines = int(line, 16), []
        elif line:
            lines.append(line)
    return chains


def enclosing_functions(path):
    """For each line of a source file, the name of the `fn` it is in (the last one opened)."""
    try:
        with open(path) as file:
            text = file.read().splitlines()
    except OSError:
        return None
    names, name = [], "(top)"
    for line in text:
        match = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:unsafe\s+)?fn\s+(\w+)", line)
        if match:
            name = match.group(1)
        names.append(name)
    return names


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[2] == "--inlined":
        binary, pattern, divisor = sys.argv[3], sys.argv[4], float(sys.argv[5])
        cost = by_address(sys.argv[1], os.path.basename(binary), pattern)
        chains = inlined_into(binary, sorted(cost))
        sources, buckets = {}, defaultdict(int)
        for address, count in cost.items():
            place = "standard library only"
            for _, file, number in chains.get(address, []):
                if "/src/" in file and os.path.exists(file) and "/rustc/" not in file:
                    if file not in sources:
                        sources[file] = enclosing_functions(file)
                    names = sources[file]
                    name = names[number - 1] if names and 0 < number <= len(names) else "?"
                    place = re.sub(r".*?/src/", "src/", file, count=1) + ":" + name
                    break
            buckets[place] += count
        total = sum(cost.values())
        print(f"{total:>14,}  {total / divisor:10.1f} per divisor  (the matching functions)")
        for place, count in sorted(buckets.items(), key=lambda item: -item[1])[
            : int(sys.argv[6]) if len(sys.argv) > 6 else 40
        ]:
            print(f"{count:>14,}  {count / divisor:10.1f}  {100 * count / total:6.2f}%  {place}")
        return
    own, inclusive, calls, lines, lines_own = read(sys.argv[1])
    total = sum(own.values())
    print(f"{total:>14,}  100.00%  total")
    if sys.argv[2] == "--top":
        count = int(sys.argv[3]) if len(sys.argv) > 3 else 40
        for name, cost in sorted(own.items(), key=lambda item: -item[1])[:count]:
            print(f"{cost:>14,}  {100 * cost / total:6.2f}%  {name[:160]}")
        return
    if sys.argv[2] == "--by-source":
        # Own instructions (inlined code included, calls left out) by the source function they
        # were written in, for the files the pattern matches: what inlining hides by name.
        pattern = sys.argv[3]
        buckets = defaultdict(int)
        sources = {}
        for (file, number), cost in lines_own.items():
            if not file or not re.search(pattern, file):
                continue
            if file not in sources:
                sources[file] = enclosing_functions(file)
            names = sources[file]
            short = re.sub(r".*/src/", "src/", file)
            name = names[number - 1] if names and 0 < number <= len(names) else f"line {number}"
            buckets[f"{short}:{name}"] += cost
        for place, cost in sorted(buckets.items(), key=lambda item: -item[1])[
            : int(sys.argv[4]) if len(sys.argv) > 4 else 30
        ]:
            print(f"{cost:>14,}  {100 * cost / total:6.2f}%  {place}")
        return
    if sys.argv[2] == "--lines":
        # Source lines of the files the pattern matches, by their instructions and their calls'.
        pattern = sys.argv[3]
        found = sorted(
            ((cost, f"{file}:{number}") for (file, number), cost in lines.items()
             if file and re.search(pattern, file)),
            reverse=True,
        )
        for cost, place in found[: int(sys.argv[4]) if len(sys.argv) > 4 else 30]:
            print(f"{cost:>14,}  {100 * cost / total:6.2f}%  {place}")
        return
    if sys.argv[2] in ("--callers", "--callees"):
        # The calls into (or out of) the functions the pattern matches, by the other end.
        into = sys.argv[2] == "--callers"
        pattern = sys.argv[3]
        edges = sorted(
            ((cost, caller if into else callee)
             for (caller, callee), cost in calls.items()
             if re.search(pattern, callee if into else caller)),
            reverse=True,
        )
        for cost, name in edges[: int(sys.argv[4]) if len(sys.argv) > 4 else 20]:
            print(f"{cost:>14,}  {100 * cost / total:6.2f}%  {name[:160]}")
        return
    for pattern in sys.argv[2:]:
        found = sorted(
            ((cost, name) for name, cost in inclusive.items() if re.search(pattern, name)),
            reverse=True,
        )
        if not found:
            print(f"{0:>14,}    0.00%  (nothing matches {pattern})")
        for cost, name in found[:6]:
            print(f"{cost:>14,}  {100 * cost / total:6.2f}%  {name[:160]}")


if __name__ == "__main__":
    main()
