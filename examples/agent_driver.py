#!/usr/bin/env python3
"""An agent that drives the ITTW protocol (protocols/ittw.yaml) over stdio.

protocol-run is started as a subprocess with `--events -`:

* its stdout carries directives, one JSON object per line with a `directive` key, and at the
  end `{"finished": {"state", "exit_code", "output"}}`;
* its stdin takes the agent's answers, `{"event": NAME, "data": {...}}` one per line;
* its stderr carries the log lines (`--log-format json`), whose `tags` the driver shows.

Each conversation below names the inputs and mocks, how the agent answers each directive, and
what the run must end with. Anything unexpected makes the script exit 1 with a message saying
what differed, so CI catches regressions in the engine or the protocol.

Usage: python3 examples/agent_driver.py [--binary PATH] [--timeout SECONDS] [--keep-state DIR]
Standard library only.
"""

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTOCOL = "protocols/ittw.yaml"


class ConversationFailed(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Finding the binary
# --------------------------------------------------------------------------------------------


def find_binary(explicit):
    if explicit:
        path = Path(explicit)
        if not path.is_absolute():
            path = Path.cwd() / path
        if not path.is_file():
            sys.exit(f"agent_driver: --binary {explicit}: no such file")
        return str(path)
    on_path = shutil.which("protocol-run")
    if on_path:
        return on_path
    for profile in ("release", "debug"):
        candidate = REPO / "target" / profile / "protocol-run"
        if candidate.is_file():
            return str(candidate)
    sys.exit(
        "agent_driver: protocol-run not found on PATH nor in target/release or target/debug; "
        "build it or pass --binary"
    )


# --------------------------------------------------------------------------------------------
# One conversation
# --------------------------------------------------------------------------------------------


def _pump(stream, kind, inbox):
    """Read a pipe line by line into the inbox until EOF, so the pipe never fills up."""
    for raw in iter(stream.readline, b""):
        inbox.put((kind, raw.decode("utf-8", "replace").rstrip("\n")))
    inbox.put((kind, None))


def _subset(expected, actual):
    """Whether every key of `expected` is in `actual` with an equal (recursively subset) value."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _subset(value, actual[key]) for key, value in expected.items()
        )
    return expected == actual


def _short(value, limit=100):
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Conversation:
    """A protocol run, the agent's answers, and what the run must end with.

    `answers` maps a directive name to a function taking the directive and returning the events
    to send back (a list of (name, data) pairs; empty when the agent just acts on it).
    `tag_answers` maps a log tag to (N, function): when the tag has been logged N times, the
    function is called once (with no argument) and the events it returns are sent.
    `directives` is the exact sequence of directive names the run must emit, `directive_fields`
    the fields each of them must carry (by name), and `tags` the tags that must all be logged.
    """

    def __init__(self, title, args, answers, directives, directive_fields, tags, state,
                 exit_code, output, tag_answers=None):
        self.title = title
        self.args = args
        self.answers = answers
        self.tag_answers = dict(tag_answers or {})
        self.directives = directives
        self.directive_fields = directive_fields
        self.tags = tags
        self.state = state
        self.exit_code = exit_code
        self.output = output

    def run(self, binary, state_dir, timeout):
        command = [binary, "run", PROTOCOL, "--events", "-", "--log-format", "json",
                   "--state-dir", state_dir] + self.args
        print(f"== {self.title}")
        print("   $ protocol-run " + " ".join(command[2:]))
        process = subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        inbox = queue.Queue()
        readers = [
            threading.Thread(target=_pump, args=(process.stdout, "out", inbox), daemon=True),
            threading.Thread(target=_pump, args=(process.stderr, "err", inbox), daemon=True),
        ]
        for reader in readers:
            reader.start()
        try:
            return self._converse(process, inbox, timeout)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            for reader in readers:
                reader.join(timeout=5)
            for pipe in (process.stdin, process.stdout, process.stderr):
                try:
                    pipe.close()
                except (BrokenPipeError, OSError):
                    pass

    def _converse(self, process, inbox, timeout):
        deadline = time.monotonic() + timeout
        directives = []        # names, in order
        finished = None
        logged_tags = []       # tag sets in order, consecutive repeats folded as [tags, count]
        raw_stderr = []        # lines that are not JSON logs (engine errors)
        open_pipes = {"out", "err"}
        tag_counts = {}
        pending_tag_answers = dict(self.tag_answers)

        def note_tags(tags):
            key = tuple(tags)
            if logged_tags and logged_tags[-1][0] == key:
                logged_tags[-1][1] += 1
            else:
                logged_tags.append([key, 1])
                print("   log  #" + " #".join(key) if key else "   log  (no tags)")

        def send(name, data):
            # `advance` moves the engine's virtual clock; anything else is an event.
            if name == "advance":
                line = json.dumps({"advance": data}) + "\n"
            else:
                line = json.dumps({"event": name, "data": data}) + "\n"
            try:
                process.stdin.write(line.encode())
                process.stdin.flush()
            except (BrokenPipeError, OSError) as error:
                raise ConversationFailed(f"could not send {name}: {error}")
            print(f"   sent {name} {_short(data)}")

        while open_pipes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConversationFailed(
                    f"no result after {timeout:g} s (directives so far: {directives}, "
                    f"{sum(count for _, count in logged_tags)} log lines); the run was killed"
                )
            try:
                kind, line = inbox.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                open_pipes.discard(kind)
                continue
            if kind == "err":
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if isinstance(record, dict) and "message" in record:
                    tags = record.get("tags") or []
                    note_tags(tags)
                    for tag in tags:
                        tag_counts[tag] = tag_counts.get(tag, 0) + 1
                        wanted = pending_tag_answers.get(tag)
                        if wanted and tag_counts[tag] >= wanted[0]:
                            del pending_tag_answers[tag]
                            for event, data in wanted[1]():
                                send(event, data)
                else:
                    raw_stderr.append(line)
                    print(f"   stderr {line}")
                continue
            # stdout: a directive, what became of an event we sent, or the final result
            try:
                message = json.loads(line)
            except ValueError:
                raise ConversationFailed(f"stdout line is not JSON: {line!r}")
            if "input_line" in message:
                outcome = message.get("outcome")
                print(f"   {outcome} {message.get('event')} (line {message['input_line']})")
                # An agent that is told its event was lost knows at once, instead of waiting.
                if outcome in ("discarded", "refused"):
                    raise ConversationFailed(f"event {message.get('event')} {outcome}: "
                                             f"{message.get('reason')}")
                continue
            if "finished" in message:
                finished = message["finished"]
                print(f"   finished in state {finished.get('state')} with exit code "
                      f"{finished.get('exit_code')}, output {_short(finished.get('output'))}")
                # Nothing more to say: closing stdin tells the engine no more events come.
                try:
                    process.stdin.close()
                except (BrokenPipeError, OSError):
                    pass
                continue
            name = message.get("directive")
            if name is None:
                raise ConversationFailed(f"stdout line is neither a directive nor finished: {line}")
            directives.append(name)
            fields = {key: value for key, value in message.items() if key != "directive"}
            print(f"   got  {name} {_short(fields)}")
            want = self.directive_fields.get(name, {})
            if not _subset(want, fields):
                raise ConversationFailed(
                    f"directive {name} carries {json.dumps(fields)}, expected at least "
                    f"{json.dumps(want)}"
                )
            answer = self.answers.get(name)
            if answer is None:
                raise ConversationFailed(f"unexpected directive {name}: the agent has no answer")
            for event, data in answer(message):
                send(event, data)

        try:
            code = process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            raise ConversationFailed("stdout closed but the process did not exit in time")

        problems = []
        if finished is None:
            problems.append(f"no `finished` line on stdout (exit code {code})")
        else:
            if finished.get("state") != self.state:
                problems.append(f"finished in state {finished.get('state')}, expected {self.state}")
            if finished.get("exit_code") != self.exit_code:
                problems.append(
                    f"finished with exit_code {finished.get('exit_code')}, expected {self.exit_code}"
                )
            if not _subset(self.output, finished.get("output")):
                problems.append(
                    f"output {json.dumps(finished.get('output'))} does not contain "
                    f"{json.dumps(self.output)}"
                )
        if code != self.exit_code:
            problems.append(f"process exited with {code}, expected {self.exit_code}")
        if directives != self.directives:
            problems.append(f"directives {directives}, expected {self.directives}")
        seen = {tag for tags, _ in logged_tags for tag in tags}
        missing = [tag for tag in self.tags if tag not in seen]
        if missing:
            problems.append(f"tags never logged: {missing} (logged: {sorted(seen)})")
        if pending_tag_answers:
            problems.append(f"answers never given (their tags were not logged often enough): "
                            f"{sorted(pending_tag_answers)}")
        if raw_stderr:
            problems.append(f"stderr lines that are not JSON logs: {raw_stderr[:5]}")
        folded = ", ".join(
            ("#" + " #".join(tags) if tags else "(no tags)") + (f" ×{count}" if count > 1 else "")
            for tags, count in logged_tags
        )
        print(f"   tags: {folded or '(none)'}")
        if problems:
            raise ConversationFailed("; ".join(problems))
        print("   ok")


# --------------------------------------------------------------------------------------------
# The agent's answers
# --------------------------------------------------------------------------------------------

GUIDANCE = {"action": "skip the task", "next_task": "TASK-10", "by": "captain"}


def answer_escalation(directive):
    # A real agent would message the captain and wait; here the captain answers at once.
    print(f"   (agent) escalating {directive['task_id']} to the captain: {directive['tool']} "
          f"{directive['path']} failed with \"{directive['error']}\" "
          f"({directive['reference']})")
    return [("captain_guidance", GUIDANCE)]


LATE_GUIDANCE = {"action": "wait for the tool to recover", "by": "captain"}


def wait_for_the_captain(directive):
    # Under --virtual-time the engine's clock stands still while we talk to it: let two
    # monitoring intervals pass while the captain thinks.
    print(f"   (agent) escalated {directive['task_id']}; the captain takes two minutes")
    return [("advance", "1m"), ("advance", "1m")]


def answer_after_monitoring():
    print("   (agent) three monitoring cycles seen; the captain answers now")
    return [("captain_guidance", LATE_GUIDANCE)]


def use_partial_result(directive):
    lines = [line for line in directive.get("lines", "").split("\n") if line]
    what = "listing" if directive.get("listing") else "content"
    print(f"   (agent) using {len(lines)} grep line(s) from {directive['source']} as the "
          f"{what} of {directive['path']}: {_short(lines, 80)}")
    return []


def claim_fallback_task(directive):
    print(f"   (agent) {directive['blocked_task']} is blocked; claiming another task meanwhile")
    # The other task takes a while: virtual time passes, and the engine re-checks the call.
    return [("advance", "10m")]


CONVERSATIONS = [
    Conversation(
        "a. happy path, no mocks: README.md is really read",
        ["--input", "tool=read_file", "--input", "path=README.md"],
        answers={},
        directives=[],
        directive_fields={},
        tags=[],
        state="resolved_at_once",
        exit_code=0,
        output={"tool": "read_file", "path": "README.md", "triggered": False},
    ),
    Conversation(
        "b. call and grep time out: escalate, the captain's guidance ends the run",
        ["--virtual-time", "--mock", "tool_call=timeout", "--mock", "grep_search=timeout",
         "--mock", "health_check=ok:ok", "--input", "tool=read_file", "--input", "path=README.md",
         "--input", "recheck_every=1m", "--input", "task_id=TASK-9"],
        answers={"escalate_to_captain": answer_escalation},
        directives=["escalate_to_captain"],
        directive_fields={"escalate_to_captain": {
            "tool": "read_file", "path": "README.md", "error": "timed out after 30000 ms",
            "grep_failed": True, "task_id": "TASK-9", "reference": "ITTW-v1.0 step 3.6",
        }},
        tags=["tool_timeout", "ittw_triggered", "ittw_grep_failed", "ittw_resolved"],
        state="guided",
        exit_code=0,
        output={"guidance": GUIDANCE},
    ),
    Conversation(
        "b2. same, but the captain answers after two more monitoring cycles (virtual minutes)",
        ["--virtual-time", "--mock", "tool_call=timeout", "--mock", "grep_search=timeout",
         "--mock", "health_check=ok:ok", "--input", "tool=read_file", "--input", "path=README.md",
         "--input", "recheck_every=1m", "--input", "task_id=TASK-9"],
        answers={"escalate_to_captain": wait_for_the_captain},
        tag_answers={"ittw_monitoring": (3, answer_after_monitoring)},
        directives=["escalate_to_captain"],
        directive_fields={"escalate_to_captain": {"task_id": "TASK-9", "grep_failed": True}},
        tags=["tool_timeout", "ittw_triggered", "ittw_grep_failed", "ittw_monitoring",
              "ittw_resolved"],
        state="guided",
        exit_code=0,
        output={"guidance": LATE_GUIDANCE},
    ),
    Conversation(
        "c. list_dir fails, grep works: the agent uses the partial result",
        ["--virtual-time", "--mock", "tool_call=error:EIO",
         "--mock", "grep_search=ok:src/main.rs:1:use std::io;", "--input", "tool=list_dir",
         "--input", "path=src"],
        answers={"use_partial_result": use_partial_result},
        directives=["use_partial_result"],
        directive_fields={"use_partial_result": {
            "tool": "list_dir", "path": "src", "source": "grep_search", "query": ".",
            "lines": "src/main.rs:1:use std::io;", "listing": True,
        }},
        tags=["tool_timeout", "ittw_triggered", "ittw_grep_success", "ittw_workaround_attempt"],
        state="partial_result",
        exit_code=0,
        output={"tool": "list_dir", "path": "src", "triggered": True, "workaround": "grep_search"},
    ),
    Conversation(
        "d. grep output cut at its limit: fall back to another task until a re-check works",
        # A real grep for any line under src/ finds more than its limit of 200 lines.
        ["--virtual-time", "--mock", "tool_call=error:EIO,error:EIO,error:EIO,ok:content",
         "--input", "tool=read_file", "--input", "path=src", "--input", "recheck_every=1m",
         "--input", "task_id=TASK-7"],
        answers={"claim_fallback_task": claim_fallback_task},
        directives=["claim_fallback_task"],
        directive_fields={"claim_fallback_task": {
            "blocked_task": "TASK-7", "tool": "read_file", "path": "src",
        }},
        tags=["tool_timeout", "ittw_triggered", "ittw_grep_success", "ittw_workaround_attempt",
              "ittw_workaround_insufficient", "ittw_fallback_task", "ittw_resolved"],
        state="resolved",
        exit_code=0,
        output={"tool": "read_file", "path": "src", "triggered": True, "result": "content"},
    ),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", help="the protocol-run binary (default: PATH, then target/)")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds each conversation may take (default 30)")
    parser.add_argument("--keep-state", metavar="DIR",
                        help="keep the runs' telemetry in DIR (default: a temporary directory, "
                             "removed at the end)")
    options = parser.parse_args()
    binary = find_binary(options.binary)
    print(f"protocol-run: {binary}")
    print(f"repository:   {REPO}")

    state_dir = options.keep_state or tempfile.mkdtemp(prefix="agent-driver-")
    failures = []
    try:
        for conversation in CONVERSATIONS:
            try:
                conversation.run(binary, state_dir, options.timeout)
            except ConversationFailed as error:
                print(f"   FAILED: {error}")
                failures.append(f"{conversation.title}: {error}")
            print()
    finally:
        if not options.keep_state:
            shutil.rmtree(state_dir, ignore_errors=True)
    if failures:
        print(f"{len(failures)} of {len(CONVERSATIONS)} conversations failed:", file=sys.stderr)
        for failure in failures:
            print(f"  - {failure}", file=sys.stderr)
        sys.exit(1)
    print("all conversations passed")


if __name__ == "__main__":
    main()
