#!/usr/bin/env python3
"""Wall time of whole processes, side by side: the commands run in interleaved rounds, so a
change in the machine's load hits each of them alike; prints the median, lowest and highest of
each and the load average before and after.

    python3 benches/process_times.py [--rounds 21] \
        'version=./target/release/protocol-run --version' \
        'validate=./target/release/protocol-run validate protocols/ittw.yaml'

Each argument is NAME=COMMAND (split on spaces, run without a shell, output discarded). A
command that fails stops the measurement. One JSON line per command.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time


def load_average():
    with open("/proc/loadavg") as file:
        return " ".join(file.read().split()[:3])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("commands", nargs="+")
    arguments = parser.parse_args()
    commands = []
    for entry in arguments.commands:
        name, _, command = entry.partition("=")
        commands.append((name, command.split()))
    times = {name: [] for name, _ in commands}
    load_before = load_average()
    for _ in range(arguments.rounds):
        for name, command in commands:
            started = time.perf_counter_ns()
            finished = subprocess.run(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            elapsed = time.perf_counter_ns() - started
            if finished.returncode != 0:
                sys.exit(f"{name}: {' '.join(command)} exited with {finished.returncode}")
            times[name].append(elapsed / 1e6)
    load_after = load_average()
    for name, _ in commands:
        samples = times[name]
        print(json.dumps({
            "command": name, "runs": len(samples),
            "median_ms": round(statistics.median(samples), 3),
            "lowest_ms": round(min(samples), 3), "highest_ms": round(max(samples), 3),
            "load_before": load_before, "load_after": load_after,
        }))


if __name__ == "__main__":
    main()
