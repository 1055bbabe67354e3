#!/usr/bin/env python3
"""A durable run's step cost beside a tree of idle child protocols: the root takes 1,000 `tick`
events while LEAVES leaves (under 8 mids) wait on an hour's timer, each holding 16 KiB of context; the time per
step, from the run's own telemetry, for the first and the last 100 ticks.

    python3 benches/run_tree.py ./target/release/protocol-run [--leaves 64 512]

Prints one JSON line per tree size. Before children had rows of their own, every root step
rewrote every child's state; now a step writes the root's own state and names its children.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

LEAF = """id: leaf
context: { held: "y" }
states:
  growing:
    always:
      - target: growing
        guard: size(held) < 16384
        actions: [{ assign: { held: "held + held" } }]
      - target: waiting
  waiting:
    # A timer keeps an idle child alive: one with nothing pending would stop unfinished.
    after: [{ delay: 1h, target: waiting }]
"""


def fan(name, child, count):
    items = ",".join(str(index) for index in range(count))
    entry = f"""    entry:
      - map: "[{items}]"
        id: items
        item: n
        max_concurrency: 64
        invoke: {{ protocol: {child} }}
""" if count else ""
    return f"""id: {name}
context: {{ n: 0, ticks: 0 }}
states:
  fanning:
{entry}    on:
      tick: {{ actions: [{{ assign: {{ ticks: "ticks + 1" }} }}] }}
      stop: done
      done.map.items: done
  done: {{ type: final }}
"""


def children_with_state(directory):
    """How many child runs have a committed state (a snapshots row), read from the store."""
    import sqlite3
    database = os.path.join(directory, "state", "state.db")
    if not os.path.exists(database):
        return 0
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
            return connection.execute(
                "SELECT COUNT(*) FROM snapshots WHERE run_id LIKE '%/%'").fetchone()[0]
    except sqlite3.Error:
        return 0


def timestamp(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def measure(binary, leaves):
    with tempfile.TemporaryDirectory() as directory:
        per_mid = max(leaves // 8, 0)
        mids = 8 if leaves else 0
        with open(os.path.join(directory, "leaf.yaml"), "w") as file:
            file.write(LEAF)
        with open(os.path.join(directory, "mid.yaml"), "w") as file:
            file.write(fan("mid", "leaf.yaml", per_mid))
        with open(os.path.join(directory, "top.yaml"), "w") as file:
            file.write(fan("top", "mid.yaml", mids))
        with open(os.path.join(directory, "ticks.jsonl"), "w") as file:
            file.write('{"event": "tick"}\n' * 1000 + '{"event": "stop"}\n')
        command = [binary, "top.yaml", "--state-dir", "state", "--events", "-"]
        # A build from before the bound on a tree's children takes no such flag.
        if "--max-children" in subprocess.run([binary, "run", "--help"], capture_output=True,
                                               text=True).stdout:
            command += ["--max-children", "10000"]
        engine = subprocess.Popen(command, cwd=directory, stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # The tree is built (every leaf's state committed) before the ticks come.
        expected = leaves + (8 if leaves else 0)
        deadline = time.time() + 120
        while children_with_state(directory) < expected and time.time() < deadline:
            time.sleep(0.1)
        with open(os.path.join(directory, "ticks.jsonl"), "rb") as ticks:
            engine.communicate(ticks.read())
        if engine.returncode != 0:
            raise SystemExit(f"the run ended with {engine.returncode}")
        runs = os.path.join(directory, "state", "runs")
        run = os.listdir(runs)[0]
        with open(os.path.join(runs, run, "events.jsonl")) as file:
            records = [json.loads(line) for line in file]
        ticks = [timestamp(record["time"]) for record in records
                 if record.get("kind") == "step" and record.get("event") == "tick"]
        # The database and its write-ahead log, which holds the latest writes.
        size = sum(os.path.getsize(os.path.join(directory, "state", name))
                   for name in ("state.db", "state.db-wal")
                   if os.path.exists(os.path.join(directory, "state", name)))
        children = children_with_state(directory)
        first = (ticks[99] - ticks[0]) / 99 * 1000
        last = (ticks[-1] - ticks[-100]) / 99 * 1000
        return {"bench": "run_tree", "leaves": leaves, "ticks": len(ticks),
                "first_100_ms_per_step": round(first, 3), "last_100_ms_per_step": round(last, 3),
                "state_db_bytes": size, "children_with_state": children}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--leaves", type=int, nargs="+", default=[0, 64, 512])
    arguments = parser.parse_args()
    for leaves in arguments.leaves:
        print(json.dumps(measure(os.path.abspath(arguments.binary), leaves)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
