#!/usr/bin/env python3
"""An agent that walks ITTW (protocols/ittw.yaml) through `protocol-run mcp`, with the official
MCP Python SDK (`pip install mcp`; tests/mcp/requirements.txt pins the version tested).

The case walked is the escalation: the file the agent wanted cannot be read, the grep on it
fails too, so the run directs the agent to escalate to the captain and waits for
`captain_guidance`. The agent answers it, and the run completes with the guidance as its output.

The loop is what any agent does with a protocol served over MCP:
1. call the protocol's tool (its name is the protocol id; its input schema is the protocol's
   inputs) to start a run;
2. read each report: `directives` say what to do, `events` say what the run can take now (with
   each event's data schema where the protocol declares one);
3. act, and answer with `send_event`; poll with `get_run` while the run works on its own (its
   directives also arrive as log messages, logger = run id, as they are committed);
4. stop when `status` is no longer `running`.

Usage: python3 examples/mcp_agent.py [--binary PATH] [--state-dir DIR]
Exits 1, saying what differed, if the run does not end as this case must.
"""

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent


def fail(message):
    print(f"mcp_agent: {message}", file=sys.stderr)
    sys.exit(1)


def report_of(result):
    """A tool result's report, or exit with its error."""
    if result.isError:
        fail(f"tool error: {result.content[0].text}")
    return result.structuredContent


async def on_log(params):
    print(f"  notice from {params.logger}: {json.dumps(params.data)}")


async def walk(session):
    tools = await session.list_tools()
    print("tools:", ", ".join(tool.name for tool in tools.tools))
    report = report_of(
        await session.call_tool("ittw", {"path": "no/such/file.txt", "timeout": "2s"})
    )
    run = report["run"]
    print(f"started {run}")
    handled = 0
    for _ in range(300):
        for directive in report["directives"][handled:]:
            handled += 1
            print(f"directive: {directive['directive']} ({directive.get('reference', '')})")
            if directive["directive"] != "escalate_to_captain":
                continue
            # Guidance is sent once the run can take it.
            while not any(event["name"] == "captain_guidance" for event in report["events"]):
                await asyncio.sleep(0.1)
                report = report_of(await session.call_tool("get_run", {"run": run}))
            guidance = {"action": "skip the task", "why": directive["error"]}
            report = report_of(
                await session.call_tool(
                    "send_event",
                    {"run": run, "event": "captain_guidance", "data": guidance},
                )
            )
            print(f"sent captain_guidance: {json.dumps(guidance)}")
        if report["status"] != "running":
            break
        await asyncio.sleep(0.1)
        report = report_of(await session.call_tool("get_run", {"run": run}))
    finished = report.get("finished")
    if report["status"] != "finished" or finished is None:
        fail(f"the run did not finish: {json.dumps(report)}")
    if finished["state"] != "guided" or finished["exit_code"] != 0:
        fail(f"the run ended in {finished['state']} with {finished['exit_code']}, not guided with 0")
    if finished["output"]["guidance"]["action"] != "skip the task":
        fail(f"the output is not the guidance: {json.dumps(finished['output'])}")
    print(f"finished: {json.dumps(finished)}")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=str(ROOT / "target/debug/protocol-run"))
    parser.add_argument("--state-dir", default=None)
    arguments = parser.parse_args()
    state_dir = arguments.state_dir or tempfile.mkdtemp(prefix="mcp-agent-")
    parameters = StdioServerParameters(
        command=arguments.binary,
        # ITTW reads the `path` a client gives: the operator narrows reads to the working
        # directory, so no client reads outside it (docs/mcp.md).
        args=["mcp", "--state-dir", state_dir, "--allow-read", "**",
              str(ROOT / "protocols/ittw.yaml")],
    )
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as session:
            await session.initialize()
            await walk(session)


asyncio.run(main())
