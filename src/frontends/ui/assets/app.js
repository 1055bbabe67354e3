// The inspector's pages, drawn from the server's JSON: the runs (`/`) and one run (`/runs/ID`),
// kept live by server-sent events. Text from runs is always set as text, never as markup; the
// only markup inserted is the statechart's SVG, which the server draws and escapes.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");

// An element `tag` with attributes and children (strings become text).
function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// Replaces `node`'s children with `children` (arrays flattened, null and undefined left out).
function fill(node, ...children) {
  node.replaceChildren(...children.flat(2).filter((child) => child !== null && child !== undefined && child !== false));
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function postJson(path, value) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(value),
  });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function statusBadge(status) {
  return element("span", { class: `status status-${status}`, "data-status": status }, status);
}

function duration(milliseconds) {
  if (milliseconds === null || milliseconds === undefined) return "";
  if (milliseconds < 1000) return `${milliseconds} ms`;
  const seconds = milliseconds / 1000;
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  const minutes = seconds / 60;
  if (minutes < 120) return `${minutes.toFixed(1)} min`;
  return `${(minutes / 60).toFixed(1)} h`;
}

function runLink(id) {
  return element("a", { href: `/runs/${encodeURIComponent(id)}`, class: "run-link" }, id);
}

// ---- The runs ----------------------------------------------------------------------------

async function showRuns() {
  crumbs.replaceChildren();
  const params = new URLSearchParams(location.search);
  const status = element("select", { id: "status-filter" },
    ["", "running", "stopped", "finished", "failed", "cancelled"].map((value) =>
      element("option", { value, selected: params.get("status") === value }, value || "any status")));
  const protocol = element("input", { id: "protocol-filter", type: "text", placeholder: "protocol id or file",
                                      value: params.get("protocol") || "" });
  const apply = () => {
    const next = new URLSearchParams();
    if (status.value) next.set("status", status.value);
    if (protocol.value) next.set("protocol", protocol.value);
    history.replaceState(null, "", next.toString() ? `/?${next}` : "/");
    load();
  };
  status.addEventListener("change", apply);
  protocol.addEventListener("change", apply);
  const list = element("div", { id: "runs" });
  main.replaceChildren(element("h1", {}, "Runs"),
                       element("div", { class: "filters" }, status, protocol), list);
  async function load() {
    const query = new URLSearchParams();
    if (status.value) query.set("status", status.value);
    if (protocol.value) query.set("protocol", protocol.value);
    try {
      const answer = await getJson(`/api/runs?${query}`);
      list.replaceChildren(...runGroups(answer.runs),
        answer.truncated ? element("p", { class: "quiet" }, "Only the newest 1,000 are listed: filter to see others.") : "");
    } catch (error) {
      list.replaceChildren(element("p", { class: "message error" }, error.message));
    }
  }
  await load();
  // The list follows the store while it is shown and its tab is visible (each look reads every
  // run's summary).
  const timer = setInterval(() => {
    if (!document.contains(list)) clearInterval(timer);
    else if (!document.hidden) load();
  }, 3000);
}

// Runs a host started (`serve` instances, MCP runs) are grouped by protocol; others stand alone.
function runGroups(runs) {
  if (runs.length === 0) return [element("p", { class: "quiet" }, "No runs yet.")];
  const groups = new Map();
  for (const run of runs) {
    const hosted = run.origin === "serve" || run.origin === "mcp";
    const key = hosted ? `${run.origin}: ${run.protocol_id || run.protocol}` : "";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(run);
  }
  return [...groups.entries()].map(([key, rows]) => element("section", { class: "group", "data-group": key || "runs" },
    key ? element("h2", {}, key, element("span", { class: "quiet" }, ` (${rows.length})`)) : null,
    runTable(rows)));
}

function runTable(runs) {
  return element("table", { class: "runs" },
    element("thead", {}, element("tr", {},
      ["Run", "Protocol", "Status", "States", "Started", "Duration", "Exit"].map((name) => element("th", {}, name)))),
    element("tbody", {}, runs.map((run) => element("tr", { "data-run": run.id },
      element("td", {}, runLink(run.id)),
      element("td", { title: run.protocol }, run.protocol_id
        ? element("a", { href: `/stats/${encodeURIComponent(run.protocol_id)}`, title: `statistics of ${run.protocol_id}` }, run.protocol_id)
        : run.protocol),
      element("td", {}, statusBadge(run.status)),
      element("td", { class: "states" }, run.states.join(", ")),
      element("td", {}, run.started),
      element("td", {}, duration(run.duration_ms)),
      element("td", {}, run.exit_code ?? "")))));
}

// ---- One run -----------------------------------------------------------------------------

async function showRun(id) {
  crumbs.replaceChildren(element("a", { href: "/" }, "Runs"), " / ", id);
  const page = {
    id,
    steps: [],          // the steps shown, oldest first
    transitions: {},    // transition index by pointer
    selected: null,     // the step whose moment is shown, or null for the latest
    run: null,
  };
  const diagram = element("div", { class: "panel diagram", id: "diagram" }, element("p", { class: "quiet" }, "Drawing…"));
  const header = element("div", { id: "run-header" });
  const act = element("div", { class: "panel", id: "act" });
  const moment = element("div", { class: "panel", id: "moment" });
  const steps = element("div", { class: "panel scroll", id: "steps" });
  const inbox = element("div", { class: "panel", id: "inbox" });
  const logs = element("div", { class: "panel scroll", id: "logs" });
  const timeline = element("div", { class: "panel", id: "timeline" });
  main.replaceChildren(header, element("div", { class: "layout" },
    element("div", {}, diagram, element("h2", {}, "Timeline"), timeline, element("h2", {}, "Steps"), steps),
    element("div", {}, act, moment, element("h2", {}, "Inbox"), inbox, element("h2", {}, "Logs"), logs)));
  page.elements = { diagram, header, act, moment, steps, inbox, logs, timeline };

  try {
    const [run, drawing, journal] = await Promise.all([
      getJson(`/api/run?id=${encodeURIComponent(id)}`),
      getJson(`/api/diagram?id=${encodeURIComponent(id)}`).catch((error) => ({ error: error.message })),
      getJson(`/api/steps?id=${encodeURIComponent(id)}`),
    ]);
    if (drawing.error) diagram.replaceChildren(element("p", { class: "message error" }, drawing.error));
    else {
      diagram.innerHTML = drawing.svg;
      page.transitions = drawing.transitions;
    }
    page.steps = journal.steps;
    page.moreBefore = journal.more_before;
    showState(page, run);
    loadLogs(page);
    loadTimeline(page);
    follow(page);
  } catch (error) {
    main.replaceChildren(element("p", { class: "message error" }, error.message));
  }
}

// Everything that shows the run as it is now (or at the selected step).
function showState(page, run) {
  page.run = run;
  const { header, act, inbox } = page.elements;
  header.replaceChildren(
    element("h1", {}, run.run),
    element("dl", { class: "kv" },
      element("dt", {}, "protocol"), element("dd", {}, run.protocol,
        run.protocol_id ? [" (", element("a", { href: `/stats/${encodeURIComponent(run.protocol_id)}`, class: "stats-link" }, "statistics"), ")"] : []),
      element("dt", {}, "status"), element("dd", {}, statusBadge(run.status)),
      element("dt", {}, "started"), element("dd", {}, run.started),
      element("dt", {}, "steps"), element("dd", { id: "step-count" }, run.steps),
      run.holder ? [element("dt", {}, "held by"), element("dd", {}, `${run.holder.process} (pid ${run.holder.pid})`)] : [],
      run.finish ? [element("dt", {}, "finished"), element("dd", {}, `${run.finish.state ?? "no final state"}, exit ${run.finish.exit_code}`)] : []));
  act.replaceChildren(...eventForms(page, run), ...runActions(page, run));
  inbox.replaceChildren(inboxTable(run.inbox || []));
  showSteps(page);
  if (page.selected === null) showMoment(page, run.state, null);
}

// What a page can send: a form for each event the run can take now, its data prefilled from
// the event's declared schema.
function eventForms(page, run) {
  const heading = element("h2", {}, "Send an event");
  if (run.status !== "running" && run.status !== "stopped") return [heading, element("p", { class: "quiet" }, "The run has ended.")];
  if (!run.events_now || run.events_now.length === 0) return [heading, element("p", { class: "quiet" }, "It takes no event now.")];
  return [heading, ...run.events_now.map((event) => {
    const data = element("textarea", { name: "data", "aria-label": `data of ${event.name}` }, skeleton(event.data_schema));
    const message = element("div", { class: "message" });
    const send = element("button", { class: "primary", type: "submit", "data-event": event.name }, `Send ${event.name}`);
    const label = event.data_schema ? "data (JSON, on the declared schema)" : "data (JSON, optional)";
    const form = element("form", { class: "event-form", "data-event": event.name }, send,
      element("div", {}, element("label", {}, label), data), message);
    form.addEventListener("submit", async (submitted) => {
      submitted.preventDefault();
      message.className = "message";
      let value = null;
      try {
        value = data.value.trim() ? JSON.parse(data.value) : null;
      } catch (error) {
        message.className = "message error";
        message.textContent = `The data is not JSON: ${error.message}`;
        return;
      }
      try {
        const answer = await postJson(`/api/event?id=${encodeURIComponent(page.id)}`, { event: event.name, data: value });
        message.textContent = `Queued as inbox entry ${answer.entry}: ${answer.reason}`;
      } catch (error) {
        message.className = "message error";
        message.textContent = error.message;
      }
    });
    return form;
  })];
}

// What a page may do to the run itself: cancel it (through its holder, or at once when none
// drives it), redrive it when it stopped or failed (a driver process is started for it), and
// the drivers this inspector started for it.
function runActions(page, run) {
  const message = element("div", { class: "message", id: "action-message" });
  const act = (label, path, done) => element("button", {
    class: "action", "data-action": label.toLowerCase(),
    onclick: async (clicked) => {
      clicked.target.disabled = true;
      message.className = "message";
      message.textContent = `${label}…`;
      try {
        done(await postJson(`${path}?id=${encodeURIComponent(page.id)}`, {}));
      } catch (error) {
        message.className = "message error";
        message.textContent = error.message;
      }
      clicked.target.disabled = false;
    } }, label);
  const open = run.status === "running" || run.status === "stopped";
  // A redrive takes a run that stopped, or ended on an error without reaching a final state.
  const failed = run.status === "failed" && run.finish && !run.finish.state;
  const buttons = [
    open ? act("Cancel", "/api/cancel", (answer) => { message.textContent = answer.reason; }) : null,
    run.status === "stopped" || failed ? act("Redrive", "/api/redrive", (answer) => {
      message.textContent = `Redriven: ${answer.driver.command} (pid ${answer.driver.pid}) drives it now.`;
      showDrivers(page);
    }) : null,
  ].filter(Boolean);
  const drivers = element("div", { id: "drivers" });
  page.elements.drivers = drivers;
  showDrivers(page);
  return [element("h2", {}, "Run"),
    buttons.length ? element("div", { class: "actions" }, buttons) : element("p", { class: "quiet" }, "Nothing to do to it now."),
    message, drivers];
}

// The drivers this inspector started for the run: their command, whether they still run, and
// the end of their log.
async function showDrivers(page) {
  const { drivers } = page.elements;
  if (!drivers) return;
  let answer;
  try {
    answer = await getJson(`/api/drivers?id=${encodeURIComponent(page.id)}`);
  } catch (error) {
    drivers.replaceChildren(element("p", { class: "message error" }, error.message));
    return;
  }
  if (answer.drivers.length === 0) {
    drivers.replaceChildren();
    return;
  }
  drivers.replaceChildren(element("h2", {}, "Drivers started here"),
    ...answer.drivers.map((driver) => element("div", { class: "driver", "data-pid": driver.pid },
      element("code", {}, driver.command), ` — pid ${driver.pid}, `,
      driver.running ? "running" : `ended (exit ${driver.exit_code ?? "by a signal"})`,
      driver.log_tail ? element("pre", {}, driver.log_tail) : null)));
}

// A value that fits `schema` as far as its shape goes: what the form starts from.
function skeleton(schema) {
  if (!schema) return "";
  const example = (part) => {
    if (!part || typeof part !== "object") return null;
    if (part.default !== undefined) return part.default;
    if (part.enum) return part.enum[0];
    switch (part.type) {
      case "object": {
        const value = {};
        for (const [name, property] of Object.entries(part.properties || {})) value[name] = example(property);
        return value;
      }
      case "array": return [];
      case "string": return "";
      case "number": case "integer": return 0;
      case "boolean": return false;
      default: return null;
    }
  };
  return JSON.stringify(example(schema), null, 2);
}

function inboxTable(entries) {
  if (entries.length === 0) return element("p", { class: "quiet" }, "No event was queued for it.");
  return element("table", {},
    element("thead", {}, element("tr", {}, ["Entry", "Event", "State", "Outcome", "Step"].map((name) => element("th", {}, name)))),
    element("tbody", {}, entries.map((entry) => element("tr", { "data-entry": entry.entry },
      element("td", {}, entry.entry), element("td", {}, entry.event), element("td", {}, entry.state),
      element("td", { class: "outcome" }, entry.outcome ?? entry.reason ?? ""), element("td", {}, entry.step ?? "")))));
}

function showSteps(page) {
  const rows = page.steps.slice().reverse().map((step) => element("tr", {
      class: `step${page.selected === step.step ? " selected" : ""}`, "data-step": step.step,
      onclick: () => selectStep(page, step.step) },
    element("td", {}, step.step),
    element("td", {}, step.at),
    element("td", {}, step.event ?? step.what ?? ""),
    element("td", {}, step.transitions.join("; ")),
    element("td", { class: "actions" }, stepActions(step.actions)),
    element("td", { class: "failure" }, step.failure ? step.failure.message : "")));
  const older = page.moreBefore ? element("button", { onclick: () => loadOlder(page) }, "Older steps") : null;
  fill(page.elements.steps, element("table", {},
    element("thead", {}, element("tr", {}, ["Step", "At", "Event", "Transitions", "Did", "Failure"].map((name) => element("th", {}, name)))),
    element("tbody", {}, rows)), older);
}

// What a step did, in order, besides its log lines (the logs panel has those): the directives
// it emitted, the effects and maps it started, what it cancelled.
function stepActions(actions) {
  return (actions || []).filter((action) => !("log" in action)).map((action) => {
    if (action.directive) return element("div", { class: "directive", "data-directive": action.directive.directive ?? "" },
      `directive ${action.directive.directive ?? JSON.stringify(action.directive)}`);
    if (action.effect) return element("div", {}, `started ${action.effect}`);
    const [kind, value] = Object.entries(action)[0] || ["", ""];
    return element("div", {}, typeof value === "string" ? `${kind} ${value}` : kind);
  });
}

async function loadOlder(page) {
  const before = page.steps.length ? page.steps[0].step : undefined;
  const answer = await getJson(`/api/steps?id=${encodeURIComponent(page.id)}&before=${before}`);
  page.steps = answer.steps.concat(page.steps);
  page.moreBefore = answer.more_before;
  showSteps(page);
}

// The moment of one step: the diagram shows its states and the transitions it took, the panel
// its context.
async function selectStep(page, sequence) {
  if (page.selected === sequence) {
    page.selected = null;
    showSteps(page);
    showMoment(page, page.run.state, null);
    return;
  }
  page.selected = sequence;
  showSteps(page);
  try {
    const state = await getJson(`/api/state?id=${encodeURIComponent(page.id)}&step=${sequence}`);
    showMoment(page, state, page.steps.find((step) => step.step === sequence));
  } catch (error) {
    page.elements.moment.replaceChildren(element("p", { class: "message error" }, error.message));
  }
}

function showMoment(page, state, step) {
  const { moment } = page.elements;
  let configuration = state ? state.configuration : [];
  // A finished run is shown in the final state it reached.
  if (!step && configuration.length === 0 && page.run.finish && page.run.finish.state) configuration = [page.run.finish.state];
  highlight(page, configuration, step ? step.transition_pointers : lastPointers(page));
  fill(moment,
    step ? element("div", { class: "moment" }, `After step ${step.step} (${step.at}). `,
                   element("button", { onclick: () => selectStep(page, step.step) }, "Back to now"), " ",
                   forkButton(page, step)) : null,
    element("h2", {}, "States"), element("p", { id: "configuration" }, configuration.join(", ") || "none"),
    element("h2", {}, "Context"), element("pre", { id: "context" }, JSON.stringify(state ? state.context : {}, null, 2)),
    state && state.timers && state.timers.length > 0 ? [element("h2", {}, "Timers"), element("pre", {}, JSON.stringify(state.timers, null, 2))] : [],
    state && state.effect_attempts && state.effect_attempts.length > 0 ? [element("h2", {}, "Running effects"), element("pre", {}, JSON.stringify(state.effect_attempts, null, 2))] : []);
}

// Starts a new run from the state after `step` (a driver process drives it) and opens it.
function forkButton(page, step) {
  const message = element("span", { class: "message", id: "fork-message" });
  const button = element("button", { class: "action", "data-action": "fork", onclick: async () => {
    button.disabled = true;
    message.className = "message";
    message.textContent = "Forking…";
    try {
      const answer = await postJson(`/api/fork?id=${encodeURIComponent(page.id)}`, { step: step.step });
      window.location.assign(`/runs/${encodeURIComponent(answer.run)}`);
    } catch (error) {
      message.className = "message error";
      message.textContent = error.message;
      button.disabled = false;
    }
  } }, "Fork from this step");
  return element("span", {}, button, " ", message);
}

function lastPointers(page) {
  for (let index = page.steps.length - 1; index >= 0; index -= 1) {
    if (page.steps[index].transition_pointers.length) return page.steps[index].transition_pointers;
  }
  return [];
}

// Marks `states` (and their ancestors, whose boxes hold them) active and the transitions at
// `pointers` taken.
function highlight(page, states, pointers) {
  const svg = page.elements.diagram.querySelector("svg");
  if (!svg) return;
  svg.querySelectorAll(".active").forEach((node) => node.classList.remove("active"));
  svg.querySelectorAll(".taken").forEach((node) => node.classList.remove("taken"));
  for (const state of states) {
    let node = svg.querySelector(`[data-state="${CSS.escape(state)}"]`);
    while (node && node !== svg) {
      if (node.classList && node.classList.contains("state")) node.classList.add("active");
      node = node.parentNode;
    }
  }
  for (const pointer of pointers || []) {
    const index = page.transitions[pointer];
    if (index === undefined) continue;
    svg.querySelectorAll(`g.transition-${index}`).forEach((node) => node.classList.add("taken"));
  }
}

// The run's log lines, filtered by level (that level and above) and by tag (any of the words
// given), as `protocol-run logs --level --tag` does. The filter's controls are made once, so a
// live update redraws the lines without taking the focus from them.
const LOG_LEVELS = ["trace", "debug", "info", "warn", "error"];

async function loadLogs(page) {
  let answer;
  try {
    answer = await getJson(`/api/logs?id=${encodeURIComponent(page.id)}`);
  } catch (error) {
    page.elements.logs.replaceChildren(element("p", { class: "message error" }, error.message));
    page.logView = null;
    return;
  }
  if (!page.logView) page.logView = logView(page);
  page.logView.lines = answer.logs;
  page.logView.draw();
}

function logView(page) {
  const view = { lines: [] };
  const table = element("div", {});
  const level = element("select", { id: "log-level", "aria-label": "least level", onchange: () => view.draw() },
    element("option", { value: "" }, "every level"), LOG_LEVELS.map((name) => element("option", { value: name }, `${name} and above`)));
  const tags = element("input", { id: "log-tags", type: "search", placeholder: "tags", "aria-label": "tags",
                                  oninput: () => view.draw() });
  view.draw = () => {
    const least = LOG_LEVELS.indexOf(level.value);
    const wanted = tags.value.split(/[\s,]+/).filter(Boolean);
    const rows = view.lines
      .filter((line) => least < 0 || LOG_LEVELS.indexOf(line.level || "info") >= least)
      .filter((line) => wanted.length === 0 || (line.tags || []).some((tag) => wanted.includes(tag)))
      .map((line) => element("tr", { class: `level-${line.level}` },
        element("td", {}, line.time), element("td", {}, line.level), element("td", {}, (line.tags || []).join(" ")),
        element("td", {}, line.message)));
    table.replaceChildren(rows.length ? element("table", {}, element("tbody", {}, rows))
                                      : element("p", { class: "quiet" }, view.lines.length ? "No log line passes the filter." : "No log lines."));
  };
  page.elements.logs.replaceChildren(element("div", { class: "filters" }, level, tags), table);
  return view;
}

// The timeline: each state's visits and each effect's attempts as bars on one time axis; an
// attempt's timeout is the thin line from its start. A map's items and the child protocols a
// state invokes are nested (indented, under a group row) below the state that owns them, a
// child's own states and effects below it in turn.
async function loadTimeline(page) {
  const { timeline } = page.elements;
  let answer;
  try {
    answer = await getJson(`/api/timeline?id=${encodeURIComponent(page.id)}`);
  } catch (error) {
    timeline.replaceChildren(element("p", { class: "message error" }, error.message));
    return;
  }
  if (answer.from === null) {
    timeline.replaceChildren(element("p", { class: "quiet" }, "No telemetry to draw (the host that drives this run keeps none)."));
    return;
  }
  const running = page.run && (page.run.status === "running" || page.run.status === "stopped");
  const start = answer.from;
  let end = Math.max(answer.to, running ? Date.now() : answer.to);
  const rows = timelineRows(answer, 0);
  for (const row of rows) {
    for (const attempt of row.effect ? row.effect.attempts : []) {
      if (attempt.timeout_ms) end = Math.max(end, attempt.from + attempt.timeout_ms);
    }
  }
  const span = Math.max(end - start, 1);
  const width = 960, left = 240, rowHeight = 22, top = 24, indent = 14;
  const x = (time) => left + ((time - start) / span) * (width - left - 10);
  const svgNamespace = "http://www.w3.org/2000/svg";
  const node = (tag, attributes, text) => {
    const made = document.createElementNS(svgNamespace, tag);
    for (const [name, value] of Object.entries(attributes)) made.setAttribute(name, value);
    if (text !== undefined) made.textContent = text;
    return made;
  };
  const height = top + rows.length * rowHeight + 8;
  const svg = node("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", class: "timeline" });
  for (let tick = 0; tick <= 4; tick += 1) {
    const time = start + (span * tick) / 4;
    svg.append(node("line", { x1: x(time), x2: x(time), y1: top - 6, y2: height, stroke: "#d0d7de" }));
    svg.append(node("text", { x: x(time), y: 12, "font-size": 10, "text-anchor": tick === 0 ? "start" : "middle", fill: "#656d76" },
      `+${duration(Math.round(time - start)) || "0 ms"}`));
  }
  // A span's bar, from `from` to `to` (the end while it lasts), with its tooltip.
  const spanBar = (from, to, attributes, title) => {
    const until = to ?? end;
    const bar = node("rect", { x: x(from), width: Math.max(x(until) - x(from), 2), ...attributes });
    bar.append(node("title", {}, `${title}: ${duration(until - from)}`));
    return bar;
  };
  rows.forEach((row, index) => {
    const y = top + index * rowHeight;
    const label = node("text", { x: 4 + row.depth * indent, y: y + 14, "font-size": 11, fill: "#1f2328",
                                 class: `row-label row-${row.kind}`, "data-depth": row.depth }, row.label);
    if (row.group) label.setAttribute("font-weight", 600);
    if (row.link) {
      // A child protocol's group row links to its own run's page.
      const link = node("a", { href: `/runs/${encodeURIComponent(row.link)}`, class: "child-link" });
      label.setAttribute("fill", "#0969da");
      link.append(label);
      svg.append(link);
    } else {
      svg.append(label);
    }
    if (row.kind === "state") {
      for (const visit of row.bars) {
        svg.append(spanBar(visit.from, visit.to, { y: y + 4, height: 14, fill: "#dafbe1", stroke: "#1a7f37",
                                                   class: "visit", "data-state": row.label, "data-depth": row.depth }, row.label));
      }
    } else if (row.kind === "map" || row.kind === "child") {
      if (row.from === null || row.from === undefined) return;
      const failed = row.outcome === "failed" || (row.kind === "child" && row.exit_code !== null && row.exit_code !== 0);
      svg.append(spanBar(row.from, row.to, { y: y + 7, height: 8, fill: failed ? "#ffebe9" : "#eaeef2",
                                             stroke: failed ? "#cf222e" : "#656d76", class: row.kind,
                                             "data-id": row.id, "data-depth": row.depth, "data-outcome": row.outcome ?? "" }, row.label));
    } else if (row.effect) {
      const effect = row.effect;
      effect.attempts.forEach((attempt, number) => {
        const to = attempt.to ?? end;
        const failed = number < effect.attempts.length - 1 || effect.outcome === "failed";
        if (attempt.timeout_ms) {
          svg.append(node("line", { x1: x(attempt.from), x2: x(attempt.from + attempt.timeout_ms), y1: y + 19, y2: y + 19,
                                    stroke: "#9a6700", "stroke-dasharray": "3 2", class: "timeout" }));
        }
        const bar = node("rect", { x: x(attempt.from), y: y + 4, width: Math.max(x(to) - x(attempt.from), 2), height: 12,
                                   fill: failed ? "#ffebe9" : "#ddf4ff", stroke: failed ? "#cf222e" : "#0969da",
                                   class: row.kind === "item" ? "attempt item" : "attempt", "data-effect": effect.id,
                                   "data-attempt": attempt.attempt, "data-timeout-ms": attempt.timeout_ms ?? "",
                                   "data-depth": row.depth, "data-outcome": effect.outcome ?? "" });
        bar.append(node("title", {}, `attempt ${attempt.attempt}` + (attempt.timeout_ms ? `, timeout ${duration(attempt.timeout_ms)}` : "")));
        svg.append(bar);
      });
    } else if (row.from !== null && row.from !== undefined) {
      // A map's item run as a child protocol: its span (its own rows follow, nested).
      svg.append(spanBar(row.from, row.to, { y: y + 4, height: 12, fill: row.outcome === "failed" ? "#ffebe9" : "#ddf4ff",
                                             stroke: row.outcome === "failed" ? "#cf222e" : "#0969da", class: "item",
                                             "data-id": row.id, "data-depth": row.depth, "data-outcome": row.outcome ?? "" }, row.label));
    }
  });
  timeline.replaceChildren(svg);
}

// The rows of one run's timeline (`/api/timeline`'s shape) at `depth`: each state's row, the
// maps and child protocols it owns nested below it, then its effects; whatever has no owner
// among the states at the end.
function timelineRows(answer, depth) {
  const rows = [];
  const byState = new Map();
  for (const visit of answer.states) {
    if (!byState.has(visit.state)) byState.set(visit.state, []);
    byState.get(visit.state).push(visit);
  }
  const maps = answer.maps || [], children = answer.children || [];
  const owned = (state) => [...maps.filter((map) => map.owner === state).map((map) => ({ map })),
                            ...children.filter((child) => child.owner === state).map((child) => ({ child }))];
  const nest = (part, at) => (part.map ? mapRows(part.map, at) : childRows(part.child, at, null));
  for (const [state, visits] of byState) {
    rows.push({ label: state, kind: "state", bars: visits, depth });
    for (const part of owned(state)) rows.push(...nest(part, depth + 1));
  }
  for (const effect of answer.effects) rows.push({ label: `${effect.id} #${effect.invocation}`, kind: "effect", effect, depth });
  const states = new Set(byState.keys());
  for (const map of maps) if (!states.has(map.owner)) rows.push(...mapRows(map, depth));
  for (const child of children) if (!states.has(child.owner)) rows.push(...childRows(child, depth, null));
  return rows;
}

// A map's group row (its id, item count and outcome), then a row per item started, by index.
function mapRows(map, depth) {
  const rows = [{ label: `map ${map.id} · ${map.items} items` + (map.outcome ? ` · ${map.outcome}` : ""), kind: "map",
                  group: true, id: map.id, from: map.from, to: map.to, outcome: map.outcome, depth }];
  for (const item of map.entries) {
    const label = `[${item.index}] ${item.id}` + (item.outcome ? ` · ${item.outcome}` : "");
    if (item.child) {
      rows.push(...childRows(item.child, depth + 1, label, item));
    } else {
      rows.push({ label, kind: "item", effect: item.effect, id: item.id, outcome: item.outcome, depth: depth + 1 });
    }
  }
  return rows;
}

// A child protocol's group row (linking to its own run's page), then its own rows nested.
function childRows(child, depth, label, item) {
  const ended = child.exit_code === null ? "" : ` → ${child.final_state ?? "no final state"} (exit ${child.exit_code})`;
  const row = { label: (label ?? `child ${child.id}`) + ended, kind: item ? "item" : "child", group: true, link: child.run,
                id: child.id, from: child.from, to: child.to, exit_code: child.exit_code, depth,
                outcome: item ? item.outcome : (child.exit_code === null ? null : child.exit_code === 0 ? "completed" : "failed") };
  return [row, ...timelineRows(child.timeline, depth + 1)];
}

// Server-sent updates: each brings the run and the steps committed since the last shown.
function follow(page) {
  const last = page.steps.length ? page.steps[page.steps.length - 1].step : undefined;
  const query = new URLSearchParams({ id: page.id });
  if (last !== undefined) query.set("after", last);
  const source = new EventSource(`/api/live?${query}`);
  page.source = source;
  source.addEventListener("update", (message) => {
    if (!document.contains(page.elements.header)) { source.close(); return; }
    const update = JSON.parse(message.data);
    const known = new Set(page.steps.map((step) => step.step));
    page.steps = page.steps.concat(update.steps.filter((step) => !known.has(step.step)));
    showState(page, update.run);
    loadLogs(page);
    loadTimeline(page);
    if (update.run.status !== "running" && update.run.status !== "stopped") source.close();
  });
  source.addEventListener("failure", (message) => {
    page.elements.header.append(element("p", { class: "message error" }, message.data));
    source.close();
  });
}

// ---- A protocol's statistics ---------------------------------------------------------------

async function showStats(protocol) {
  crumbs.replaceChildren(element("a", { href: "/" }, "Runs"), " / statistics of ", protocol);
  let stats;
  try {
    stats = await getJson(`/api/stats?protocol=${encodeURIComponent(protocol)}`);
  } catch (error) {
    main.replaceChildren(element("p", { class: "message error" }, error.message));
    return;
  }
  const rate = stats.retry_success_rate;
  const percent = (value) => (value === null || value === undefined ? "–" : `${Math.round(value * 100)}%`);
  fill(main,
    element("h1", {}, `Statistics of ${protocol}`),
    element("p", { class: "quiet" }, `${stats.summed} runs with telemetry summed` + (stats.older_left_out ? " (the newest; older ones left out)" : "")),
    element("dl", { class: "kv", id: "rates" },
      element("dt", {}, "retry success"), element("dd", { id: "retry-success" }, `${percent(rate)} of ${stats.retry_sequences} retried calls`),
      element("dt", {}, "attempts to success"), element("dd", {}, stats.average_attempts_to_success === null ? "–" : stats.average_attempts_to_success.toFixed(1))),
    element("div", { class: "layout" },
      element("div", {},
        element("h2", {}, "Outcomes per action"),
        chart(Object.entries(stats.outcomes_per_action).map(([name, counts]) => ({ name, parts: [
          { value: counts.succeeded, color: "#1a7f37", label: "succeeded" },
          { value: counts.failed, color: "#cf222e", label: "failed" },
          { value: stats.timeouts_per_action[name] || 0, color: "#9a6700", label: "timed out" }] })), "outcomes"),
        element("h2", {}, "Attempts of retried calls"),
        chart(Object.entries(stats.retries_per_action).map(([name, retries]) => ({ name, parts: [
          { value: retries.attempts, color: "#0969da", label: "attempts" }] })), "attempts")),
      element("div", {},
        element("h2", {}, "Average time in each state"),
        chart(Object.entries(stats.average_time_in_state_ms).map(([name, value]) => ({ name, parts: [
          { value, color: "#8250df", label: "ms per run", shown: duration(value) }] })), "time"),
        element("h2", {}, "Log lines per tag"),
        chart(Object.entries(stats.tags).map(([name, value]) => ({ name, parts: [
          { value, color: "#656d76", label: "lines" }] })), "tags"))));
}

// A horizontal bar chart: one row per item, its parts stacked, each part's value written after.
function chart(items, name) {
  if (items.length === 0) return element("p", { class: "quiet" }, "Nothing to chart.");
  const width = 560, left = 180, rowHeight = 22;
  const largest = Math.max(1, ...items.map((item) => item.parts.reduce((sum, part) => sum + part.value, 0)));
  const svgNamespace = "http://www.w3.org/2000/svg";
  const node = (tag, attributes, text) => {
    const made = document.createElementNS(svgNamespace, tag);
    for (const [key, value] of Object.entries(attributes)) made.setAttribute(key, value);
    if (text !== undefined) made.textContent = text;
    return made;
  };
  const svg = node("svg", { viewBox: `0 0 ${width} ${items.length * rowHeight + 4}`, width: "100%", class: `chart chart-${name}` });
  items.forEach((item, index) => {
    const y = index * rowHeight + 2;
    svg.append(node("text", { x: 0, y: y + 14, "font-size": 11 }, item.name));
    let x = left;
    for (const part of item.parts) {
      const length = (part.value / largest) * (width - left - 80);
      const bar = node("rect", { x, y: y + 3, width: Math.max(length, part.value > 0 ? 1 : 0), height: 14, fill: part.color,
                                 "data-item": item.name, "data-part": part.label, "data-value": part.value });
      bar.append(node("title", {}, `${item.name}: ${part.shown ?? part.value} ${part.label}`));
      svg.append(bar);
      x += length;
    }
    const total = item.parts.map((part) => part.shown ?? part.value).join(" / ");
    svg.append(node("text", { x: x + 4, y: y + 14, "font-size": 11, fill: "#656d76" }, total));
  });
  return element("div", { class: "panel" }, svg);
}

// ---- Routing -----------------------------------------------------------------------------

function route() {
  const path = location.pathname;
  if (path.startsWith("/runs/")) return showRun(decodeURIComponent(path.slice("/runs/".length)));
  if (path.startsWith("/stats/")) return showStats(decodeURIComponent(path.slice("/stats/".length)));
  return showRuns();
}

route();
