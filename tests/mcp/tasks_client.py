"""Drives runs as MCP tasks (the Tasks extension, SEP-2663) and elicitation with the official MCP Python SDK; prints one JSON line per step.

Usage: tasks_client.py BINARY STATE_DIR SCRIPT ARGUMENT...
(the ARGUMENTs follow `mcp --state-dir STATE_DIR`: protocols and flags), or
tasks_client.py URL - SCRIPT (a server already listening with `mcp --http`). The SDK (1.30) speaks the
older task dialect of 2025-11-25, so the task scripts declare the extension at initialize and
send `tools/call`, `tasks/get`, `tasks/update` and `tasks/cancel` as raw JSON-RPC requests
through the SDK's session. SCRIPT is `task_update`, `task_send_event`, `task_cancel`,
`task_failed:PROTOCOL`, `task_unknown`, `task_stored:RUN` (a task an earlier server drove), `plain`,
`input_required` (raw 2026-07-28 calls),
`elicit_accept`, `elicit_decline`, `elicit_off` or `elicit_form` (events-demo's `approve`, a
flat schema, answered as a form).
"""

import asyncio
import json
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict

from client import drive_server, group_alive, report, say, sleeper_group
from mcp import types
from mcp.shared.exceptions import McpError

TASKS = "io.modelcontextprotocol/tasks"
ITTW_ARGUMENTS = {"path": "missing/file.txt", "timeout": "1s"}
GUIDANCE = {"action": "skip the task"}


class Raw(types.Result):
    """Any result, every field kept."""

    model_config = ConfigDict(extra="allow")


class RawRequest(BaseModel):
    """A request the SDK has no type for: its method and params as they go on the wire."""

    method: str
    params: dict[str, Any]


async def call(session, method, params):
    """Sends `method`; returns its result, or `{"error": {code, message, data}}`."""
    try:
        result = await session.send_request(RawRequest(method=method, params=params), Raw)
    except McpError as error:
        return {"error": {"code": error.error.code, "message": error.error.message, "data": error.error.data}}
    return result.model_dump(by_alias=True, exclude={"meta"})


async def initialize_with_tasks(session):
    """Initializes as `session.initialize` does, declaring the tasks extension."""
    await session.send_request(
        types.ClientRequest(
            types.InitializeRequest(
                params=types.InitializeRequestParams(
                    protocolVersion=types.LATEST_PROTOCOL_VERSION,
                    capabilities=types.ClientCapabilities(extensions={TASKS: {}}),
                    clientInfo=types.Implementation(name="tasks-client", version="1"),
                )
            )
        ),
        types.InitializeResult,
    )
    await session.send_notification(types.ClientNotification(types.InitializedNotification()))


async def poll(session, task, predicate, seconds=20):
    """Polls `tasks/get` until `predicate(task)`; returns it and the statuses seen on the way."""
    seen = []
    current = None
    for _ in range(int(seconds * 10)):
        current = await call(session, "tasks/get", {"taskId": task})
        if not seen or seen[-1] != current.get("status"):
            seen.append(current.get("status"))
        if predicate(current):
            return current, seen
        await asyncio.sleep(0.1)
    raise SystemExit(f"timed out; last task: {current}")


# A request's own declaration of the tasks extension (its 2026-07-28 envelope): the server
# answers a task only to a call that carries it.
TASK_META = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}


async def call_as_task(session, name, arguments):
    """`tools/call` of `name`, declaring the tasks extension in the request."""
    return await call(session, "tools/call", {"name": name, "arguments": arguments, "_meta": TASK_META})


def ended(task):
    return task.get("status") not in ("working", "input_required")


async def start_ittw_task(session):
    created = await call_as_task(session, "ittw", ITTW_ARGUMENTS)
    say(step="created", result=created)
    waiting, seen = await poll(session, created["taskId"], lambda task: task["status"] == "input_required")
    say(step="input_required", task=waiting, seen=seen)
    return created["taskId"], next(iter(waiting["inputRequests"]))


def answer(data):
    return {"action": "accept", "content": {"data": data}}


async def task_update(session):
    task, key = await start_ittw_task(session)
    update = lambda responses: call(session, "tasks/update", {"taskId": task, "inputResponses": responses})
    say(step="bad_update", result=await update({key: answer("{not json")}))
    say(step="stale_update", result=await update({"captain_guidance@0": answer("1")}))
    declined = await update({key: {"action": "decline"}})
    status = (await call(session, "tasks/get", {"taskId": task}))["status"]
    say(step="declined", result=declined, status=status)
    say(step="updated", result=await update({key: answer(json.dumps(GUIDANCE))}))
    done, seen = await poll(session, task, ended)
    say(step="ended", task=done, seen=seen)


async def task_send_event(session):
    task, _ = await start_ittw_task(session)
    sent = await session.call_tool("send_event", {"run": task, "event": "captain_guidance", "data": GUIDANCE})
    say(step="sent", report=report(sent))
    done, seen = await poll(session, task, ended)
    say(step="ended", task=done, seen=seen)


async def task_cancel(session):
    created = await call_as_task(session, "sleeper", {})
    task = created["taskId"]
    group = await sleeper_group()
    working = await call(session, "tasks/get", {"taskId": task})
    say(step="sleeping", group=group, task=working)
    say(step="cancelled", result=await call(session, "tasks/cancel", {"taskId": task}))
    say(step="group", alive=await group_alive(group))
    say(step="get", task=await call(session, "tasks/get", {"taskId": task}))
    say(step="again", result=await call(session, "tasks/cancel", {"taskId": task}))


async def task_failed(session, protocol):
    created = await call_as_task(session, protocol, {})
    done, seen = await poll(session, created["taskId"], ended)
    say(step="ended", task=done, seen=seen)


async def task_unknown(session):
    say(step="get", result=await call(session, "tasks/get", {"taskId": "ittw:nope"}))
    say(step="cancel", result=await call(session, "tasks/cancel", {"taskId": "ittw:nope"}))
    bad = await call_as_task(session, "ittw", {})
    say(step="bad_input", result=bad)


async def task_stored(session, task):
    """A task of a run an earlier server drove, answered from the store."""
    say(step="stored", task=await call(session, "tasks/get", {"taskId": task}))


async def plain(session):
    started = await session.call_tool("ittw", ITTW_ARGUMENTS)
    say(step="started", report=report(started))
    say(step="get", result=await call(session, "tasks/get", {"taskId": report(started)["run"]}))


# Per-request metadata of a 2026-07-28 request from a client that answers elicitation forms.
MODERN = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "tasks-client", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


async def input_required(session):
    """events-demo on 2026-07-28 requests: asked by the result, answered by retries."""
    modern_call = lambda params: call(session, "tools/call", {**params, "_meta": MODERN})
    first = await modern_call({"name": "events-demo", "arguments": {}})
    say(step="first", result=first)
    run = first["requestState"]
    approve = next(key for key in first["inputRequests"] if key.startswith("approve@"))
    retry = lambda responses, state=run: modern_call(
        {"name": "events-demo", "arguments": {}, "inputResponses": responses, "requestState": state}
    )
    say(step="forged", result=await retry({approve: {"action": "accept", "content": {"by": "x"}}}, "ittw:other"))
    say(step="declined", result=await retry({approve: {"action": "decline"}}))
    say(step="refused", result=await retry({approve: {"action": "accept", "content": {"by": ""}}}))
    say(step="accepted", result=await retry({approve: {"action": "accept", "content": {"by": "ann"}}}))


# What each elicitation script answers, and what it was asked.
ASKED = []


async def elicit_ittw(session):
    started = await session.call_tool("ittw", ITTW_ARGUMENTS)
    say(step="called", report=report(started), asked=ASKED)


async def elicit_form(session):
    started = await session.call_tool("events-demo", {})
    say(step="called", report=report(started), asked=ASKED)


def elicitation(action):
    async def callback(context, params):
        ASKED.append({"message": params.message, "requestedSchema": params.requestedSchema})
        if action == "accept":
            return types.ElicitResult(action="accept", content={"data": json.dumps(GUIDANCE)})
        if action == "form":
            return types.ElicitResult(action="accept", content={"by": "ann"})
        return types.ElicitResult(action=action)

    return callback


SCRIPTS = {
    "task_update": (task_update, True, None),
    "task_send_event": (task_send_event, True, None),
    "task_cancel": (task_cancel, True, None),
    "task_failed": (task_failed, True, None),
    "task_stored": (task_stored, True, None),
    "task_unknown": (task_unknown, True, None),
    "plain": (plain, False, None),
    "input_required": (input_required, False, None),
    "elicit_accept": (elicit_ittw, False, elicitation("accept")),
    "elicit_decline": (elicit_ittw, False, elicitation("decline")),
    "elicit_off": (elicit_ittw, False, elicitation("accept")),
    "elicit_form": (elicit_form, False, elicitation("form")),
}


async def main():
    binary, state_dir, script, *arguments = sys.argv[1:]
    if ":" in script:
        name, argument = script.split(":", 1)
        body, with_tasks, callback = SCRIPTS[name]
        body = (lambda run: lambda session: run(session, argument))(body)
    else:
        body, with_tasks, callback = SCRIPTS[script]
    options = {"elicitation_callback": callback} if callback else {}

    async def drive(session):
        if with_tasks:
            await initialize_with_tasks(session)
        else:
            await session.initialize()
        await body(session)

    await drive_server(binary, state_dir, arguments, drive, **options)


asyncio.run(main())
