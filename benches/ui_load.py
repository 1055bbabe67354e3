#!/usr/bin/env python3
"""How fast the web inspector's pages load in a real browser: a list of 1,000 runs and a run of
10,000 steps, made by the real binary, then opened in the distribution's Chromium through
Playwright's core (tests/ui, `npm ci --prefix tests/ui`).

    python3 benches/ui_load.py ./target/release/protocol-run [--runs 1000] [--steps 10000]
        [--rounds 5] [--chromium /usr/bin/chromium]

Prints one JSON line: for each page, the time from navigation to the page drawn (every run row;
the run's statechart and its newest steps), min/median/max over the rounds, and the API
answers' own times (the store's reads and their JSON), so a slow page says where it is slow.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

PROTOCOL = """id: ui-bench
version: "1"
context: { pings: 0 }
states:
  waiting:
    on:
      ping: { target: waiting, actions: [{ assign: { pings: "pings + 1" } }] }
      stop: done
  done: { type: final, exit_code: 0 }
"""

def spread(values):
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    arguments = parser.parse_args()
    binary = os.path.abspath(arguments.binary)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    work = tempfile.mkdtemp(prefix="protocol-run-ui-bench-")
    try:
        with open(os.path.join(work, "bench.yaml"), "w") as file:
            file.write(PROTOCOL)
        # One instance stepped `steps` times, the rest started and left waiting: `runs` in all.
        lines = [json.dumps({"instance": f"i{index}"}) for index in range(arguments.runs)]
        lines += [json.dumps({"instance": "i0", "event": "ping"})] * (arguments.steps - 1)
        subprocess.run([binary, "serve", "bench.yaml", "--state-dir", "state"], cwd=work,
                       input="\n".join(lines) + "\n", text=True, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        inspector = subprocess.Popen([binary, "ui", "--state-dir", "state", "--listen", "127.0.0.1:0"],
                                     cwd=work, stderr=subprocess.PIPE, text=True)
        try:
            line = inspector.stderr.readline()
            address = line.split("http://")[1].split("/")[0]
            base = f"http://{address}/"
            run = "ui-bench:i0"
            answers = {}
            for name, path in [("runs", "api/runs"), ("run", f"api/run?id={run}"),
                               ("steps", f"api/steps?id={run}"), ("diagram", f"api/diagram?id={run}")]:
                times = []
                for _ in range(arguments.rounds):
                    started = time.perf_counter()
                    with urllib.request.urlopen(base + path) as response:
                        body = response.read()
                    times.append(round((time.perf_counter() - started) * 1000, 1))
                answers[name] = {"ms": spread(times), "bytes": len(body)}
            driver = os.path.join(root, "tests", "ui", "load.mjs")
            output = subprocess.run(["node", driver, arguments.chromium, base, run, str(arguments.runs),
                                     str(arguments.rounds)], capture_output=True, text=True, check=True)
            pages = json.loads(output.stdout)
            print(json.dumps({
                "runs": arguments.runs,
                "steps": arguments.steps,
                "list_page_ms": spread(pages["list"]),
                "run_page_ms": spread(pages["one"]),
                "api": answers,
                "load_average": os.getloadavg()[0],
            }))
        finally:
            inspector.send_signal(signal.SIGTERM)
            inspector.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
