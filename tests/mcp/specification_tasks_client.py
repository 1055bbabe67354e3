"""Drives runs as tasks in the dialect of the 2025-11-25 specification (SEP-1686) with the official MCP Python SDK's own task API (`session.experimental`); prints one JSON line per step.

Usage: specification_tasks_client.py BINARY STATE_DIR SCRIPT ARGUMENT... (the ARGUMENTs follow
`mcp --state-dir STATE_DIR`), or specification_tasks_client.py URL - SCRIPT (a server already
listening with `mcp --http`). SCRIPT is `elicit` (ITTW as a task to input_required, then
`tasks/result`, which asks for the guidance by an elicitation tied to the task, and the status
notifications seen), `send_event` (the same, the guidance sent with send_event instead; then a
call with a bad input), `cancel` (the sleeper as a task, cancelled with `tasks/cancel`) or
`list:PROTOCOL` (25 tasks of PROTOCOL listed page by page; over HTTP, a second session lists none
of them and cannot read one).
"""

import asyncio
import json
import sys
import warnings

from client import drive_server, group_alive, say, sleeper_group
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

# The SDK marks its task API deprecated (tasks move to an extension in mcp 2.0): it still speaks
# the 2025-11-25 dialect this drives.
warnings.simplefilter("ignore", DeprecationWarning)

ITTW_ARGUMENTS = {"path": "missing/file.txt", "timeout": "1s"}
GUIDANCE = {"action": "skip the task"}
TASKS_LISTED = 25

# `notifications/tasks/status` params as they came, and the elicitation requests asked.
STATUSES = []
ASKED = []


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def on_message(message):
    if isinstance(message, types.ServerNotification) and isinstance(
        message.root, types.TaskStatusNotification
    ):
        STATUSES.append(dump(message.root.params))


async def on_elicit(context, params):
    ASKED.append({"message": params.message, "meta": dump(params.meta) if params.meta else None})
    return types.ElicitResult(action="accept", content={"data": json.dumps(GUIDANCE)})


async def outcome(request):
    """The result of `request`, or its JSON-RPC error."""
    try:
        return {"result": dump(await request)}
    except McpError as error:
        return {"error": {"code": error.error.code, "message": error.error.message}}


async def poll(session, task, wanted, seconds=20):
    """Polls `tasks/get` until the task's status is in `wanted`; returns it and the statuses seen."""
    seen = []
    for _ in range(seconds * 10):
        current = await session.experimental.get_task(task)
        if not seen or seen[-1] != current.status:
            seen.append(current.status)
        if current.status in wanted:
            return dump(current), seen
        await asyncio.sleep(0.1)
    raise SystemExit(f"timed out waiting for {wanted}; seen {seen}")


async def notified(task, status, seconds=10):
    """Waits until a status notification said `task` is `status`."""
    for _ in range(seconds * 10):
        if any(item["taskId"] == task and item["status"] == status for item in STATUSES):
            return
        await asyncio.sleep(0.1)


async def start_ittw(session):
    tools = await session.list_tools()
    say(
        step="tools",
        execution={tool.name: dump(tool.execution) if tool.execution else None for tool in tools.tools},
    )
    created = await session.experimental.call_tool_as_task("ittw", ITTW_ARGUMENTS)
    say(step="created", result=dump(created), ttl=created.task.ttl)
    task = created.task.taskId
    waiting, seen = await poll(session, task, {"input_required"})
    say(step="input_required", task=waiting, seen=seen)
    return task


async def elicit(session):
    task = await start_ittw(session)
    result = await session.experimental.get_task_result(task, types.CallToolResult)
    say(step="result", result=dump(result), asked=ASKED)
    say(step="get", task=dump(await session.experimental.get_task(task)))
    await notified(task, "completed")
    say(step="statuses", statuses=[item for item in STATUSES if item["taskId"] == task])


async def send_event(session):
    task = await start_ittw(session)
    sent = await session.call_tool(
        "send_event", {"run": task, "event": "captain_guidance", "data": GUIDANCE}
    )
    say(step="sent", report=sent.structuredContent)
    result = await session.experimental.get_task_result(task, types.CallToolResult)
    say(step="result", result=dump(result), asked=ASKED)
    # A bad input makes no task.
    say(
        step="bad_input",
        outcome=await outcome(session.experimental.call_tool_as_task("ittw", {})),
    )


async def cancel(session):
    created = await session.experimental.call_tool_as_task("sleeper", {})
    task = created.task.taskId
    group = await sleeper_group()
    say(step="sleeping", group=group, task=dump(await session.experimental.get_task(task)))
    say(step="cancelled", outcome=await outcome(session.experimental.cancel_task(task)))
    say(step="group", alive=await group_alive(group))
    say(step="again", outcome=await outcome(session.experimental.cancel_task(task)))
    result = await session.experimental.get_task_result(task, types.CallToolResult)
    say(step="result", result=dump(result))
    # Another tool is no task: its execution.taskSupport is forbidden.
    say(
        step="not_a_task",
        outcome=await outcome(session.experimental.call_tool_as_task("get_run", {"run": task})),
    )


async def list_tasks(session, url, protocol):
    created = []
    for _ in range(TASKS_LISTED):
        created.append((await session.experimental.call_tool_as_task(protocol, {})).task.taskId)
    say(step="created", tasks=created)
    first = await session.experimental.list_tasks()
    say(step="first", tasks=[task.taskId for task in first.tasks], next=first.nextCursor)
    second = await session.experimental.list_tasks(first.nextCursor)
    say(
        step="second",
        tasks=[dump(task) for task in second.tasks],
        next=second.nextCursor,
    )
    say(step="bad_cursor", outcome=await outcome(session.experimental.list_tasks("no-such-cursor")))
    if url is None:
        return
    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write) as other:
            await other.initialize()
            listed = await other.experimental.list_tasks()
            say(step="other_session", tasks=[task.taskId for task in listed.tasks])
            say(
                step="other_get",
                outcome=await outcome(other.experimental.get_task(created[0])),
            )


async def main():
    binary, state_dir, script, *arguments = sys.argv[1:]
    url = binary if binary.startswith("http://") else None
    name, _, argument = script.partition(":")
    bodies = {
        "elicit": elicit,
        "send_event": send_event,
        "cancel": cancel,
        "list": lambda session: list_tasks(session, url, argument),
    }
    options = {"message_handler": on_message}
    if name == "elicit":
        options["elicitation_callback"] = on_elicit

    async def drive(session):
        initialized = await session.initialize()
        say(
            step="initialized",
            protocol=initialized.protocolVersion,
            tasks=dump(initialized.capabilities.tasks) if initialized.capabilities.tasks else None,
        )
        await bodies[name](session)

    await drive_server(binary, state_dir, arguments, drive, **options)


asyncio.run(main())
