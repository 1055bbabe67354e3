"""Drives `protocol-run mcp` with the official MCP Python SDK; prints one JSON line per step.

Usage: client.py BINARY STATE_DIR SCRIPT PROTOCOL...
   or: client.py URL - SCRIPT (a server already listening with `mcp --http`)
SCRIPT is `ittw` (start ITTW on a missing path, wait for captain_guidance, send it, see it
finish), `errors` (a bad input is a tool error naming it), `cancel` (start `sleeper`, cancel
it, see its process group gone), `kill` (start ITTW, wait for guidance, SIGKILL the server) or
`resume:RUN` (resume RUN, send it guidance); for a server restarted over runs an earlier one
left: `leave` (start ITTW, wait for guidance, close the session), `start_kill:PROTOCOL[,N]` (start
PROTOCOL, wait for N directives, SIGKILL the server), `get:RUN` (get_run), `guide:RUN` (get_run,
then send guidance), `finish:RUN` (get_run until it ends on its own), `start_many:PROTOCOL,N` (start N runs, leave), `flood:PROTOCOL,N` (over HTTP: start N runs, list_runs from
this client and a new one every 100), `list` (list_runs). More scripts: `telemetry`
(read runs' telemetry resources), `grants` (run each protocol tool to its end, with its logs).
"""

import asyncio
import json
import os
import signal
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


# Log messages from the server: each a directive, its logger the run id.
NOTICES = []


async def on_log(params):
    NOTICES.append({"logger": params.logger, "level": params.level, "data": params.data})


def say(**fields):
    print(json.dumps(fields), flush=True)


def report(result):
    if result.isError:
        return {"error": result.content[0].text}
    return result.structuredContent


async def wait_for(session, run, predicate, seconds=20):
    """Polls get_run until `predicate(report)` holds; returns that report."""
    for _ in range(int(seconds * 10)):
        current = report(await session.call_tool("get_run", {"run": run}))
        if predicate(current):
            return current
        await asyncio.sleep(0.1)
    raise SystemExit(f"timed out; last report: {current}")


def waits_for_guidance(current):
    """The run waits for the captain: only guidance moves it (while ITTW's health check runs,
    guidance is taken too, but the run waits on the check)."""
    return current.get("waiting") == "input" and any(
        event["name"] == "captain_guidance" for event in current["events"]
    )


async def ittw(session):
    started = report(await session.call_tool("ittw", {"path": "missing/file.txt", "timeout": "1s"}))
    say(step="started", report=started)
    run = started["run"]
    waiting = await wait_for(
        session,
        run,
        waits_for_guidance,
    )
    say(step="waiting", report=waiting)
    logs = report(
        await session.call_tool("get_logs", {"run": run, "tag": "ittw_grep_failed", "level": "warn"})
    )
    say(step="logs", logs=logs)
    errors_only = report(await session.call_tool("get_logs", {"run": run, "level": "error"}))
    say(step="error_logs", logs=errors_only)
    bad_level = await session.call_tool("get_logs", {"run": run, "level": "loud"})
    say(step="bad_level", error=bad_level.isError, text=bad_level.content[0].text)
    say(step="diagram", report=report(await session.call_tool("get_diagram", {"run": run})))
    sent = report(
        await session.call_tool(
            "send_event",
            {"run": run, "event": "captain_guidance", "data": {"action": "skip the task"}},
        )
    )
    say(step="sent", report=sent)
    for _ in range(50):
        if NOTICES:
            break
        await asyncio.sleep(0.1)
    say(step="notices", notices=NOTICES)
    runs = json.loads((await session.call_tool("list_runs", {})).content[0].text)["runs"]
    say(step="listed", runs=runs)


async def strict(session):
    """ITTW on a file that exists: it ends at once, unless the grants refuse the read."""
    started = report(await session.call_tool("ittw", {"path": "present.txt", "timeout": "1s"}))
    run = started["run"]
    denied = []
    for _ in range(100):
        current = report(await session.call_tool("get_run", {"run": run}))
        logs = report(
            await session.call_tool("get_logs", {"run": run, "tag": "permission_denied"})
        )
        denied = logs["logs"]
        if current["status"] != "running" or denied:
            break
        await asyncio.sleep(0.1)
    say(step="outcome", report=current, denied=denied)


async def resources(session):
    started = report(await session.call_tool("ittw", {"path": "missing/file.txt", "timeout": "1s"}))
    listed = await session.list_resources()
    say(step="resources", resources=[(str(item.uri), item.mimeType) for item in listed.resources])
    templates = await session.list_resource_templates()
    say(step="templates", templates=[item.uriTemplate for item in templates.resourceTemplates])
    protocol = await session.read_resource("protocol-run://protocol/ittw")
    say(step="protocol", text=protocol.contents[0].text)
    run = await session.read_resource(f"protocol-run://run/{started['run']}")
    say(step="run", run=started["run"], report=json.loads(run.contents[0].text))
    try:
        await session.read_resource("file:///etc/passwd")
        say(step="bogus", error=None)
    except Exception as error:  # the SDK raises the server's JSON-RPC error
        say(step="bogus", error=str(error))


async def errors(session):
    bad = await session.call_tool("ittw", {"path": "x", "tool": "write_file"})
    say(step="bad_input", error=bad.isError, text=bad.content[0].text)
    missing = await session.call_tool("ittw", {})
    say(step="missing_input", error=missing.isError, text=missing.content[0].text)
    unknown = await session.call_tool("send_event", {"run": "ittw:nope", "event": "x"})
    say(step="unknown_run", error=unknown.isError, text=unknown.content[0].text)


def processes():
    """(pid, parent pid, process group, command line) of every process, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().split(b"\0")
        except OSError:
            continue
        found.append((int(entry), int(fields[1]), int(fields[2]), command))
    return found


async def sleeper_group():
    """The process group of the sleeper's `sleep 31.4159` once it runs; None if it has not
    started within 10 s."""
    group = None
    for _ in range(100):
        group = next(
            (pgid for _, _, pgid, command in processes() if command[:2] == [b"sleep", b"31.4159"]),
            None,
        )
        if group is not None:
            break
        await asyncio.sleep(0.1)
    return group


async def group_alive(group):
    """Whether process group `group` still has a process after up to 5 s of waiting for it to go."""
    alive = True
    for _ in range(50):
        alive = any(pgid == group for _, _, pgid, _ in processes())
        if not alive:
            break
        await asyncio.sleep(0.1)
    return alive


async def cancel(session):
    started = report(await session.call_tool("sleeper", {}))
    run = started["run"]
    group = await sleeper_group()
    say(step="sleeping", group=group)
    cancelled = await session.call_tool("cancel_run", {"run": run})
    say(step="cancelled", report=report(cancelled))
    say(step="group", alive=await group_alive(group))
    say(step="get_run", report=report(await session.call_tool("get_run", {"run": run})))
    again = await session.call_tool("resume_run", {"run": run})
    say(step="resume_cancelled", error=again.isError, text=again.content[0].text)


async def ittw_waiting(session):
    """Starts ITTW on a missing path and waits until it can take captain_guidance; its run id."""
    started = report(await session.call_tool("ittw", {"path": "missing/file.txt", "timeout": "1s"}))
    run = started["run"]
    await wait_for(
        session,
        run,
        waits_for_guidance,
    )
    say(step="waiting", run=run)
    return run


def kill_server():
    server = next(pid for pid, parent, _, _ in processes() if parent == os.getpid())
    os.kill(server, signal.SIGKILL)
    # The session's streams break with the server: leave without closing them.
    os._exit(0)


async def send_guidance(session, run):
    sent = report(
        await session.call_tool(
            "send_event",
            {"run": run, "event": "captain_guidance", "data": {"action": "skip the task"}},
        )
    )
    say(step="sent", report=sent)


async def kill(session):
    await ittw_waiting(session)
    kill_server()


async def resume(session, run):
    say(step="listed", runs=json.loads((await session.call_tool("list_runs", {})).content[0].text)["runs"])
    resumed = report(await session.call_tool("resume_run", {"run": run}))
    say(step="resumed", report=resumed)
    await send_guidance(session, run)


async def start_and_kill(session, argument):
    """PROTOCOL[,N]: starts PROTOCOL (no inputs), waits for N directives (committed once
    reported), says its report, then SIGKILLs the server."""
    protocol, _, count = argument.partition(",")
    started = report(await session.call_tool(protocol, {}))
    started = await wait_for(
        session, started["run"], lambda current: len(current["directives"]) >= int(count or 0)
    )
    say(step="started", report=started)
    kill_server()


async def start_many(session, argument):
    """PROTOCOL,N: starts N runs of PROTOCOL (no inputs) and leaves: the server stops them."""
    protocol, _, count = argument.partition(",")
    for _ in range(int(count)):
        report(await session.call_tool(protocol, {}))
    say(step="started", count=int(count))


async def flood(session, argument):
    """PROTOCOL,N, over HTTP: starts N runs of PROTOCOL (no inputs) in this session, one after
    another, each answered with its report or a tool error; after every 100th, list_runs answers
    in this session and in a new client's. Says how many starts got each answer (`running`, or
    the error's text), and how many times the other requests answered."""
    protocol, _, count = argument.partition(",")
    url = sys.argv[1]
    outcomes = {}
    answered = 0

    async def newcomer(other):
        await other.initialize()
        listed = await other.call_tool("list_runs", {})
        if listed.isError:
            raise SystemExit(f"a new client's list_runs failed: {listed.content[0].text}")

    for index in range(int(count)):
        started = report(await session.call_tool(protocol, {}))
        outcome = started.get("error") or started["status"]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if index % 100 == 99:
            listed = await session.call_tool("list_runs", {})
            if listed.isError:
                raise SystemExit(f"list_runs failed after {index + 1} starts: {listed.content[0].text}")
            await drive_server(url, "-", [], newcomer)
            answered += 1
    say(step="flooded", outcomes=outcomes, answered=answered)


async def get(session, run):
    """The run's report as a restarted server has it, without resume_run."""
    say(step="got", report=report(await session.call_tool("get_run", {"run": run})))


async def guide(session, run):
    """A restarted server's report of RUN (no resume_run), then captain_guidance sent to it."""
    await get(session, run)
    await send_guidance(session, run)


async def finish(session, run):
    """Waits for RUN, resumed at start, to end on its own (a timer)."""
    await get(session, run)
    ended = await wait_for(session, run, lambda current: current["status"] != "running")
    say(step="ended", report=ended)


async def list_runs(session):
    """list_runs, as a restarted server answers it."""
    say(step="listed", runs=json.loads((await session.call_tool("list_runs", {})).content[0].text)["runs"])


async def leave(session):
    """Starts ITTW, waits for captain_guidance, and closes the session: the server stops the run."""
    await ittw_waiting(session)


async def telemetry(session):
    """ITTW over MCP to its end; then the telemetry of that run, of `cli-1` and `many-1` (runs of
    served protocols that `protocol-run run` made), of an unknown run, and of `other-1` (a run
    of a protocol not served)."""
    run = await ittw_waiting(session)
    await session.call_tool(
        "send_event", {"run": run, "event": "captain_guidance", "data": {"action": "skip the task"}}
    )
    templates = await session.list_resource_templates()
    say(
        step="templates",
        templates=[[item.uriTemplate, item.description] for item in templates.resourceTemplates],
    )
    for name, target in [
        ("mcp_run", run),
        ("cli_run", "cli-1"),
        ("many", "many-1"),
        ("unknown", "ittw:nope"),
        ("not_served", "other-1"),
    ]:
        try:
            read = await session.read_resource(f"protocol-run://run/{target}/telemetry")
            say(step=name, run=target, telemetry=json.loads(read.contents[0].text),
                mime=read.contents[0].mimeType)
        except Exception as error:  # the SDK raises the server's JSON-RPC error
            say(step=name, run=target, error=str(error))


async def grants(session):
    """Starts each protocol tool in turn with no arguments and waits for its run to end; its
    report and its log lines."""
    management = {
        "send_event", "wait_for_state", "get_run", "list_runs", "cancel_run", "resume_run",
        "get_logs", "get_diagram"
    }
    for tool in (await session.list_tools()).tools:
        if tool.name in management:
            continue
        started = report(await session.call_tool(tool.name, {}))
        if "error" in started:
            say(step=f"grant:{tool.name}", error=started["error"])
            continue
        run = started["run"]
        final = await wait_for(session, run, lambda current: current["status"] != "running")
        logs = report(await session.call_tool("get_logs", {"run": run}))
        say(step=f"grant:{tool.name}", report=final, logs=logs["logs"])


async def run_script(script, session):
    await session.initialize()
    tools = await session.list_tools()
    say(
        step="tools",
        tools={tool.name: tool.inputSchema for tool in tools.tools},
    )
    if script.startswith("resume:"):
        await resume(session, script.removeprefix("resume:"))
        return
    scripts = {
        "ittw": ittw,
        "errors": errors,
        "cancel": cancel,
        "kill": kill,
        "strict": strict,
        "resources": resources,
        "leave": leave,
        "list": list_runs,
        "telemetry": telemetry,
        "grants": grants,
    }
    # SCRIPT:ARGUMENT scripts, for a run (or protocol) named by an earlier one.
    with_argument = {
        "start_kill": start_and_kill,
        "start_many": start_many,
        "flood": flood,
        "get": get,
        "guide": guide,
        "finish": finish,
    }
    name, _, argument = script.partition(":")
    if name in with_argument:
        await with_argument[name](session, argument)
        return
    await scripts[script](session)


async def drive_server(binary, state_dir, arguments, body, **session_options):
    """Runs `body(session)` in a session of the server listening at URL `binary`, or of
    `binary mcp --state-dir STATE_DIR ARGUMENTS...` on stdio."""
    if binary.startswith("http://"):
        async with streamablehttp_client(binary) as (read, write, _):
            async with ClientSession(read, write, **session_options) as session:
                await body(session)
        return
    parameters = StdioServerParameters(
        command=binary, args=["mcp", "--state-dir", state_dir, *arguments]
    )
    finished = False
    try:
        async with stdio_client(parameters) as (read, write):
            async with ClientSession(read, write, **session_options) as session:
                await body(session)
                finished = True
    except BaseExceptionGroup as group:
        # A notice the server sent while the session was closing (a run still emitting) meets
        # the SDK's closed stream: nothing the script checks. Anything else is a failure.
        _, others = group.split((anyio.ClosedResourceError, anyio.BrokenResourceError))
        if not finished or others is not None:
            raise


async def main():
    binary, state_dir, script, *protocols = sys.argv[1:]
    await drive_server(
        binary,
        state_dir,
        protocols,
        lambda session: run_script(script, session),
        logging_callback=on_log,
    )


# tasks_client.py imports the helpers above.
if __name__ == "__main__":
    asyncio.run(main())
