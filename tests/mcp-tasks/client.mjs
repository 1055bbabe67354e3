// Drives runs as MCP tasks with the TypeScript SDK and its Tasks extension package (SEP-2663, pinned in package.json); prints one JSON line per step.
//
// Usage: node client.mjs BINARY STATE_DIR SCRIPT ARGUMENT...
// (the ARGUMENTs follow `mcp --state-dir STATE_DIR`). The session is a 2026-07-28 one (the
// extension package drives SEP-2663 tasks only there); the SDK's own codecs do not take task
// results, so the package dispatches its task requests through `rawDispatch`, which writes them
// on the client's transport and takes their responses back. SCRIPT is `guidance` (ITTW answered
// through the package's input handler until it completes) or `cancel` (start `sleeper`, cancel
// its task, see its process group gone) or `input_required` (a plain call on a client that
// answers elicitation: the server answers `input_required`, the SDK asks its handler and
// retries).

import { readdirSync, readFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const [binary, stateDirectory, script, ...serverArguments] = process.argv.slice(2);
const say = (fields) => console.log(JSON.stringify(fields));
const sleep = (milliseconds) => new Promise((resolve) => setTimeout(resolve, milliseconds));

const clientInfo = { name: "protocol-run-tasks-test", version: "1" };
// `input_required` is a plain client that answers elicitation, without the extension.
const plain = script === "input_required";
const capabilities = plain ? { elicitation: { form: {} } } : { extensions: { "io.modelcontextprotocol/tasks": {} } };
const client = new Client(clientInfo, {
  capabilities,
  versionNegotiation: { mode: { pin: "2026-07-28" } },
});
const asked = [];
if (plain) {
  client.setRequestHandler("elicitation/create", async (request) => {
    asked.push(request.params);
    return { action: "accept", content: { data: JSON.stringify({ action: "skip the task" }) } };
  });
}
const transport = new StdioClientTransport({
  command: binary,
  args: ["mcp", "--state-dir", stateDirectory, ...serverArguments],
});
await client.connect(transport);

// Requests the package sends raw carry string ids of their own; their responses go back to it,
// everything else to the SDK client.
const waiting = new Map();
let nextId = 0;
const clientReceives = transport.onmessage;
transport.onmessage = (message, extra) => {
  const resolve = typeof message?.id === "string" ? waiting.get(message.id) : undefined;
  if (resolve === undefined) {
    clientReceives?.(message, extra);
    return;
  }
  waiting.delete(message.id);
  resolve("error" in message ? { kind: "error", error: message.error } : { kind: "result", result: message.result });
};
const rawDispatch = (request) =>
  new Promise((resolve) => {
    const id = `tasks-${nextId++}`;
    waiting.set(id, resolve);
    transport.send({ jsonrpc: "2.0", id, ...request });
  });

const session = createTaskSessionFromClient(client, {
  endpointId: "protocol-run",
  rawDispatch,
  v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo, clientCapabilities: capabilities },
  onInputRequest: async (request) => {
    asked.push(request);
    return { action: "accept", content: { data: JSON.stringify({ action: "skip the task" }) } };
  },
});

/** Process groups of running `sleep 31.4159` commands, from /proc. */
function sleepingGroups() {
  const groups = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const command = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (command[0] === "sleep" && command[1] === "31.4159") groups.push(Number(fields[2]));
    } catch {
      // The process ended while it was read.
    }
  }
  return groups;
}

async function guidance() {
  const execution = await session.callTool("ittw", { path: "missing/file.txt", timeout: "1s" });
  const statuses = [];
  const { outcome } = await execution.settle({
    onEvent: (event) => {
      if (event.type === "task" && statuses.at(-1) !== event.task.status) statuses.push(event.task.status);
    },
  });
  say({ step: "settled", kind: execution.kind, taskId: execution.handle?.taskId, statuses, asked, outcome });
}

async function cancel() {
  const execution = await session.callTool("sleeper", {});
  let group;
  for (let attempt = 0; attempt < 100 && group === undefined; attempt++) {
    group = sleepingGroups()[0];
    if (group === undefined) await sleep(100);
  }
  say({ step: "sleeping", group: group ?? null });
  await execution.cancel();
  const { outcome } = await execution.settle();
  let alive = true;
  for (let attempt = 0; attempt < 50 && alive; attempt++) {
    alive = sleepingGroups().includes(group);
    if (alive) await sleep(100);
  }
  say({ step: "cancelled", outcome: outcome.status, alive });
}

/** A plain call: the SDK fulfils the `input_required` result with its handler and retries. */
async function inputRequired() {
  const result = await client.callTool({ name: "ittw", arguments: { path: "missing/file.txt", timeout: "1s" } });
  say({ step: "called", report: result.structuredContent ?? null, isError: result.isError ?? false, asked });
}

try {
  await { guidance, cancel, input_required: inputRequired }[script]();
} finally {
  await session.close();
  await client.close();
}
