#!/usr/bin/env python3
"""One durable `protocol-run run --events -` fed M event lines on stdin (the protocol of
`serve_process.py`, one instance); times its output lines.

    python3 benches/run_events.py ./target/release/protocol-run [--events M] [--rounds R]

Prints one JSON line per round. `run` tells each events line's outcome on stdout once the step
is committed (the steps of one read batch in one transaction), so the time from the first outcome
line to the last is the event throughput, parsing, stepping, committing and writing included. The
last line (`stop`) ends the run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_process import PROTOCOL  # noqa: E402


def one_round(binary, events):
    lines = "".join('{"event": "ping"}\n' for _ in range(events)) + '{"event": "stop"}\n'
    directory = tempfile.mkdtemp(prefix="run-bench-")
    protocol = os.path.join(directory, "run-bench.yaml")
    with open(protocol, "w") as file:
        file.write(PROTOCOL)
    start = time.perf_counter()
    process = subprocess.Popen(
        [binary, "run", protocol, "--events", "-", "--state-dir",
         os.path.join(directory, "state")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )

    def feed():
        process.stdin.write(lines.encode())
        process.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    descriptor = process.stdout.fileno()
    seen = 0
    first_at = None
    while seen < events + 1:
        chunk = os.read(descriptor, 1 << 20)
        if not chunk:
            sys.exit(f"run ended after {seen} outcome lines")
        seen += chunk.count(b'"input_line"')
        if first_at is None and seen:
            first_at = time.perf_counter()
    end = time.perf_counter()
    process.wait()
    shutil.rmtree(directory, ignore_errors=True)
    return {
        "bench": "run_events", "events": events,
        "total_seconds": round(end - start, 3),
        "events_per_second": round(events / (end - first_at)),
        "exit_code": process.returncode,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    arguments = parser.parse_args()
    for _ in range(arguments.rounds):
        print(json.dumps(one_round(arguments.binary, arguments.events)), flush=True)


if __name__ == "__main__":
    main()
