#!/usr/bin/env python3
"""The real `protocol-run serve` process: N instances with an hour-long timer each, then M event
lines spread over them, all through stdin; times the output lines and reads the peak RSS.

    python3 benches/serve_process.py ./target/release/protocol-run [--instances N]
        [--events M] [--store sqlite|memory]

Prints one JSON line. The host reports each step on stdout once it is committed, so the time
from the last `started` line to the last step line is the event throughput, parsing, stepping,
committing and writing included. The timers keep the host alive after input ends; it is stopped
with SIGTERM once every event is reported.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PROTOCOL = """id: serve-bench
version: "1"
context: { pings: 0 }
states:
  waiting:
    on:
      ping: { actions: [{ assign: { pings: "pings + 1" } }] }
      stop: done
    after: [{ delay: 1h, target: done }]
  done: { type: final, exit_code: 0 }
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--store", default="memory")
    arguments = parser.parse_args()
    instances, events = arguments.instances, arguments.events
    directory = tempfile.mkdtemp(prefix="serve-bench-")
    try:
        measure(arguments.binary, arguments.store, directory, instances, events)
    finally:
        # A SQLite store of 10,000 runs is tens of megabytes: the guard runs this many times.
        shutil.rmtree(directory, ignore_errors=True)


def measure(binary, store, directory, instances, events):
    """Feeds `serve` its instances and events from `directory` and prints its figures."""
    creations = "".join(f'{{"instance": "t{i}"}}\n' for i in range(instances)).encode()
    pings = "".join(
        f'{{"instance": "t{k % instances}", "event": "ping"}}\n' for k in range(events)
    ).encode()
    protocol = os.path.join(directory, "serve-bench.yaml")
    with open(protocol, "w") as file:
        file.write(PROTOCOL)
    process = subprocess.Popen(
        [binary, "serve", protocol, "--store", store,
         "--state-dir", os.path.join(directory, "state")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    start = time.perf_counter()

    def feed():
        process.stdin.write(creations)
        process.stdin.flush()
        process.stdin.write(pings)
        process.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    descriptor = process.stdout.fileno()
    seen = 0
    started_at = None
    while seen < instances + events:
        chunk = os.read(descriptor, 1 << 20)
        if not chunk:
            sys.exit(f"serve ended after {seen} lines")
        seen += chunk.count(b"\n")
        if started_at is None and seen >= instances:
            started_at = time.perf_counter()
    end = time.perf_counter()
    with open(f"/proc/{process.pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    process.send_signal(signal.SIGTERM)
    process.wait()
    print(json.dumps({
        "bench": "serve_process", "store": store,
        "instances": instances, "events": events,
        "start_seconds": round(started_at - start, 3),
        "events_per_second": round(events / (end - started_at)),
        "peak_rss_kb": int(fields["VmHWM"].split()[0]),
        "rss_kb": int(fields["VmRSS"].split()[0]),
    }))


if __name__ == "__main__":
    main()
