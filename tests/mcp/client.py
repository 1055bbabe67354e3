"""Drives `protocol-run mcp` with the official MCP Python SDK; prints one JSON line per step.

Usage: client.py BINARY STATE_DIR SCRIPT PROTOCOL...
SCRIPT is `ittw` (start ITTW on a missing path, wait for captain_guidance, send it, see it
finish) or `errors` (a bad input is a tool error naming it).
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


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


async def ittw(session):
    started = report(await session.call_tool("ittw", {"path": "missing/file.txt", "timeout": "1s"}))
    say(step="started", report=started)
    run = started["run"]
    waiting = await wait_for(
        session,
        run,
        lambda current: any(event["name"] == "captain_guidance" for event in current["events"]),
    )
    say(step="waiting", report=waiting)
    sent = report(
        await session.call_tool(
            "send_event",
            {"run": run, "event": "captain_guidance", "data": {"action": "skip the task"}},
        )
    )
    say(step="sent", report=sent)
    runs = json.loads((await session.call_tool("list_runs", {})).content[0].text)
    say(step="listed", runs=runs)


async def errors(session):
    bad = await session.call_tool("ittw", {"path": "x", "tool": "write_file"})
    say(step="bad_input", error=bad.isError, text=bad.content[0].text)
    missing = await session.call_tool("ittw", {})
    say(step="missing_input", error=missing.isError, text=missing.content[0].text)
    unknown = await session.call_tool("send_event", {"run": "ittw:nope", "event": "x"})
    say(step="unknown_run", error=unknown.isError, text=unknown.content[0].text)


async def main():
    binary, state_dir, script, *protocols = sys.argv[1:]
    parameters = StdioServerParameters(
        command=binary, args=["mcp", "--state-dir", state_dir, *protocols]
    )
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            say(
                step="tools",
                tools={tool.name: tool.inputSchema for tool in tools.tools},
            )
            await {"ittw": ittw, "errors": errors}[script](session)


asyncio.run(main())
